package config

import (
	"strings"
	"testing"

	"github.com/pgtools/pgtools/runner/apitest"
)

// TestFleetConfig: fleet.secret_file is read at load and never shown; forwarding without a
// secret, a short secret, a peer that is not a base URL, a DNS name without a port and an
// unknown scheme are each refused naming the key and the fix.
func TestFleetConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const secret = "fleet-secret-0123456789abcdef0123456789abcdef"
	good := apitest.WriteFile(t, dir, "fleet.secret", secret+"\n")
	short := apitest.WriteFile(t, dir, "short.secret", "too-short\n")
	db := `"databases":{"default":{"url":"postgres://u@127.0.0.1/db"}},"replica_id":"r1"`
	load := func(name, fleet string) (*Config, error) {
		cfg, err := LoadConfigFile(apitest.WriteFile(t, dir, name+".json", `{`+db+`,"fleet":`+fleet+`}`))
		if err != nil {
			return nil, err
		}
		return cfg, cfg.Validate()
	}
	cfg, err := load("good", `{"peers":["http://10.0.0.1:8080","https://pgtools-1.example:8443/"],"peers_dns":"pgtools-headless:8080","secret_file":"`+good+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	if string(cfg.Fleet.Secret) != secret || !cfg.Fleet.Forwards() {
		t.Fatalf("fleet = %+v", cfg.Fleet)
	}
	eff, err := cfg.EffectiveJSON()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(eff), secret) {
		t.Fatal("the effective config shows the fleet secret")
	}
	if cfg, err := load("off", `{}`); err != nil || cfg.Fleet.Forwards() {
		t.Fatalf("no fleet: %v", err)
	}
	for _, tc := range []struct{ name, fleet, want string }{
		{"nosecret", `{"peers":["http://10.0.0.1:8080"]}`, "fleet.secret_file: forwarding between replicas"},
		{"short", `{"peers_dns":"pgtools-headless:8080","secret_file":"` + short + `"}`, "is 9 bytes long; use at least 32"},
		{"peer", `{"peers":["10.0.0.1:8080"],"secret_file":"` + good + `"}`, `fleet.peers[0]: "10.0.0.1:8080" is not a replica's base URL`},
		{"path", `{"peers":["http://10.0.0.1:8080/api"],"secret_file":"` + good + `"}`, "fleet.peers[0]"},
		{"dns", `{"peers_dns":"pgtools-headless","secret_file":"` + good + `"}`, "fleet.peers_dns: \"pgtools-headless\" is not a name and port"},
		{"scheme", `{"peers_dns":"h:1","scheme":"ftp","secret_file":"` + good + `"}`, "fleet.scheme"},
		{"missing", `{"peers_dns":"h:1","secret_file":"` + dir + `/nope"}`, "fleet.secret_file"},
	} {
		_, err := load(tc.name, tc.fleet)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
