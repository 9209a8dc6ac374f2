package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/tools"
)

func TestExampleConfigsAreValid(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("../../examples/config/*.json")
	if len(files) == 0 {
		t.Fatal("no example configs found")
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := ValidateConfig(raw); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestLoadConfigFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := apitest.WriteFile(t, dir, "token", "  file-token-0123456789abcdef\n")
	password := apitest.WriteFile(t, dir, "password", "s3cret-pw\n")
	good := apitest.WriteFile(t, dir, "good.json", `{"tokens":[{"name":"a","token_file":"`+secret+`","scopes":["read"],"default_format":"csv"}],
	  "databases":{"default":{"url":"postgres://u@127.0.0.1/db","password_file":"`+password+`",
	    "policy":{"max_limit":50,"statement_timeout_ms":1500,"pool_wait_ms":250,"prepared_statements":false,"default_format":"columns"}}},
	  "limits":{"rate_per_second":2.5,"max_concurrent_per_token":3},
	  "shutdown":{"drain_delay_seconds":1.5,"grace_seconds":0}}`)
	cfg, err := LoadConfigFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	d := cfg.Databases["default"]
	if cfg.Tokens[0].Secret != "file-token-0123456789abcdef" || d.Password != "s3cret-pw" || d.Policy.MaxLimit != 50 ||
		d.Policy.StatementTimeout != 1500*time.Millisecond || d.Policy.PoolWait != 250*time.Millisecond || d.Policy.PreparesStatements() ||
		d.Policy.DefaultFormat != "columns" || cfg.Tokens[0].DefaultFormat != "csv" {
		t.Fatalf("config not loaded as written: %+v", cfg)
	}
	if cfg.Limits.RatePerSecond != 2.5 || cfg.Limits.Burst != 3 || cfg.Limits.MaxConcurrentPerToken != 3 {
		t.Errorf("limits = %+v, want rate 2.5, burst 3 (rate rounded up), concurrency 3", cfg.Limits)
	}
	if cfg.Shutdown.DrainDelay() != 1500*time.Millisecond || cfg.Shutdown.Grace() != 0 || cfg.Shutdown.GraceSeconds == nil {
		t.Errorf("shutdown = %v / %v (set %v), want 1.5s and an explicit 0", cfg.Shutdown.DrainDelay(), cfg.Shutdown.Grace(), cfg.Shutdown.GraceSeconds != nil)
	}
}

// TestInvalidConfigFiles checks that every problem of a config file gets exactly one line that
// names where it is and what to do, and that all of a file's problems come at once.
func TestInvalidConfigFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	shortToken := apitest.WriteFile(t, dir, "short-token", "tooshort\n")
	notPEM := apitest.WriteFile(t, dir, "ca.pem", "not a certificate")
	cases := []struct {
		name string
		doc  string
		// want has one entry per expected line: substrings that line must contain.
		want [][]string
	}{
		{"wrong types, unknown keys, missing DSN",
			`{"listen": 8080, "tokenz": [], "databases": {"default": {"max_conns": "ten"}}}`,
			[][]string{
				{"databases.default.max_conns: must be an integer, not a string", "e.g. 10"},
				{`databases.default: missing "url" or "url_file"`, "postgres://"},
				{"listen: must be a string, not a number", `e.g. "127.0.0.1:8080"`},
				{"tokenz: unknown key", `did you mean "tokens"?`, "Allowed here:", "databases"},
			}},
		{"nested unknown key and both url forms",
			`{"databases": {"main": {"url": "postgres://a@b/c", "url_file": "/f", "polcy": {"read_only": true}}}}`,
			[][]string{
				{"databases.main.polcy: unknown key", `did you mean "policy"?`},
				{`databases.main: give only one of "url" and "url_file"`},
			}},
		{"no databases", `{"listen": "127.0.0.1:8080"}`,
			[][]string{{`(top level): missing "databases"`}}},
		{"empty databases", `{"databases": {}}`,
			[][]string{{"databases: needs at least 1 entry", `"default"`}}},
		{"bad names and values",
			`{"databases": {"Prod-DB": {"url": "postgres://x"}}, "log_level": "trace",
			  "tokens": [{"name": "a", "token": "short", "scopes": ["admin"]}, {"scopes": []}]}`,
			[][]string{
				{`databases: "Prod-DB" is not a valid name`, "lowercase"},
				{`log_level: "trace" is not allowed`, "'debug', 'info', 'warn', 'error'"},
				{`tokens[0].scopes[0]: "admin" is not allowed`, "'read', 'write', 'ddl'"},
				{"tokens[0].token: is 5 characters long, at least 16 needed", "openssl rand"},
				{"tokens[1].scopes: needs at least 1 item"},
				{`tokens[1]: missing "name"`},
				{`tokens[1]: missing "token" or "token_file"`},
			}},
		{"numbers out of range",
			`{"databases": {"default": {"url": "postgres://x", "policy": {"max_limit": 0, "statement_timeout_ms": "1s", "prepared_statements": "off"}}},
			  "limits": {"rate_per_second": 0}, "sessions": {"ttl": 3}}`,
			[][]string{
				{"databases.default.policy.max_limit: 0 is too small; the minimum is 1"},
				{"databases.default.policy.prepared_statements: must be a boolean, not a string", "e.g. true"},
				{"databases.default.policy.statement_timeout_ms: must be an integer, not a string", "e.g. 30000"},
				{"limits.rate_per_second: must be more than 0", "remove the key for no limit"},
				{"sessions.ttl: unknown key", `did you mean "ttl_seconds"?`},
			}},
		{"not JSON", "{\n  \"databases\": {,\n}", [][]string{{"line 2, column 17: not valid JSON"}}},
		{"secret files", `{"tokens": [{"name": "a", "token_file": "` + shortToken + `", "scopes": ["read"]},
		                   {"name": "b", "token_file": "/nonexistent/token", "scopes": ["read"]}],
		                  "databases": {"default": {"url_file": "/nonexistent/url"}}}`,
			[][]string{
				{"tokens[0].token_file: the token in", "8 characters long; use at least 16"},
				{"tokens[1].token_file: cannot read /nonexistent/token: no such file or directory"},
				{"databases.default.url_file: cannot read /nonexistent/url: no such file or directory"},
			}},
		{"settings that span fields",
			`{"listen": "0.0.0.0:8080",
			  "databases": {"default": {"url": "postgres://u:pw@h/db?sslmode=verify-fulll", "policy": {"default_limit": 500, "max_limit": 100}},
			                "tls": {"url": "postgres://u@h/db?sslmode=verify-full&sslrootcert=` + notPEM + `"},
			                "nowhere": {"url": "host=h port=99999"}},
			  "tokens": [{"name": "a", "token": "0123456789abcdef", "scopes": ["read"], "databases": ["analytics"]},
			             {"name": "a", "token": "0123456789abcdef", "scopes": ["read"]}],
			  "limits": {"burst": 5}}`,
			[][]string{
				{`databases.default.policy: default_limit 500 is above max_limit 100`},
				{`databases.default.url: sslmode "verify-fulll" is not one of disable, allow, prefer, require, verify-ca, verify-full`},
				{"databases.nowhere.url: port \"99999\" is not a port number"},
				{"databases.tls.url: sslrootcert: " + notPEM + " holds no PEM certificate"},
				{"limits.burst: has no effect without limits.rate_per_second"},
				{`token "a" (config file tokens[0]): names database "analytics", which is not configured (configured: default, nowhere, tls)`},
				{`token "a" (config file tokens[1]): has the same secret as token "a" (config file tokens[0])`},
				{`token "a" (config file tokens[1]): the name "a" is also used by token "a" (config file tokens[0])`},
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := apitest.WriteFile(t, t.TempDir(), "pgtools.json", tc.doc)
			cfg, err := LoadConfigFile(path)
			if err == nil {
				err = cfg.Validate()
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("want a *ConfigError, got %v", err)
			}
			if len(ce.Problems) != len(tc.want) {
				t.Errorf("%d problems, want %d:\n  %s", len(ce.Problems), len(tc.want), strings.Join(ce.Problems, "\n  "))
			}
			for i, want := range tc.want {
				if i >= len(ce.Problems) {
					break
				}
				for _, sub := range want {
					if !strings.Contains(ce.Problems[i], sub) {
						t.Errorf("problem %d = %q\n  does not contain %q", i, ce.Problems[i], sub)
					}
				}
			}
			msg := err.Error()
			if strings.Count(msg, "\n") != len(ce.Problems) {
				t.Errorf("want a header and one line per problem:\n%s", msg)
			}
			for _, secret := range []string{"pw@", "0123456789abcdef", "tooshort"} {
				if strings.Contains(msg, secret) {
					t.Errorf("error message shows a secret (%q):\n%s", secret, msg)
				}
			}
		})
	}
}

func TestDescribeDSN(t *testing.T) {
	t.Parallel()
	ca := apitest.NewPKI(t, t.TempDir(), "ca").File
	cases := []struct {
		dsn, password string
		want          ConnSummary
	}{
		{"postgres://app:pw@db.internal:6432/sales?sslmode=verify-full&sslrootcert=" + ca, "",
			ConnSummary{Host: "db.internal", Port: 6432, Database: "sales", User: "app", RootCert: ca, Password: "[REDACTED]",
				TLS: "verify-full (TLS; CA and host name checked)"}},
		{"postgres://app@db.internal/sales?sslmode=verify-ca&sslrootcert=" + ca, "from-file",
			ConnSummary{Host: "db.internal", Port: 5432, Database: "sales", User: "app", RootCert: ca, Password: "[REDACTED]",
				TLS: "verify-ca (TLS; CA checked, host name not)"}},
		{"host=db.internal dbname=sales user=app sslmode=require", "",
			ConnSummary{Host: "db.internal", Port: 5432, Database: "sales", User: "app", Password: "none",
				TLS: "require (TLS; server certificate not verified)"}},
		{"postgres://app@db.internal/sales", "",
			ConnSummary{Host: "db.internal", Port: 5432, Database: "sales", User: "app", Password: "none",
				TLS: "prefer (TLS without verification, falls back to plaintext; use verify-full over a network)"}},
		{"postgres://app@127.0.0.1/sales?sslmode=disable", "",
			ConnSummary{Host: "127.0.0.1", Port: 5432, Database: "sales", User: "app", Password: "none", TLS: "disable (no TLS)"}},
	}
	for _, c := range cases {
		got, err := DescribeDSN(c.dsn, c.password)
		if err != nil {
			t.Errorf("%s: %v", c.dsn, err)
			continue
		}
		if got != c.want {
			t.Errorf("DescribeDSN(%s)\n got %+v\nwant %+v", c.dsn, got, c.want)
		}
	}
	if _, err := DescribeDSN("postgres://app@h/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem", ""); err == nil ||
		!strings.Contains(err.Error(), "cannot read the CA file /nonexistent/ca.pem") {
		t.Errorf("missing CA file: %v", err)
	}
	if _, err := DescribeDSN("postgres://app:p%zzsecret@h/db", ""); err == nil || strings.Contains(err.Error(), "zzsecret") {
		t.Errorf("malformed URL: error %v must exist and not echo the URL", err)
	}
}

func TestEffectiveJSONRedactsSecrets(t *testing.T) {
	t.Parallel()
	cfg := &Config{
		Tokens: []auth.Token{{Secret: "token-secret-0123456789", Name: "n8n", Scopes: []string{"read"}, Origin: "env PGTOOLS_TOKENS"}},
		Databases: map[string]DatabaseConfig{
			"default": {URL: "postgres://app:url-password@db.internal:5432/app?sslmode=verify-full", Origin: "env DATABASE_URL"},
			"reports": {URL: "postgres://ro@db.internal/reports?sslmode=disable", Password: "file-password", Policy: tools.Policy{ReadOnly: true, PreparedStatements: new(bool)}},
		},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	out, err := cfg.EffectiveJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"token-secret-0123456789", "url-password", "file-password", "postgres://"} {
		if strings.Contains(string(out), secret) {
			t.Errorf("effective config shows %q:\n%s", secret, out)
		}
	}
	var got struct {
		Listen    string
		Tokens    []struct{ Name, Token, Source string }
		Databases map[string]struct {
			URL        string
			Connection ConnSummary
			Source     string
			Policy     struct {
				ReadOnly           bool  `json:"read_only"`
				DefaultLimit       int   `json:"default_limit"`
				PreparedStatements *bool `json:"prepared_statements"`
			}
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	def, rep := got.Databases["default"], got.Databases["reports"]
	if got.Listen != "127.0.0.1:8080" || got.Tokens[0].Token != "[REDACTED]" || got.Tokens[0].Source != "env PGTOOLS_TOKENS" ||
		def.URL != "[REDACTED]" || def.Connection.Host != "db.internal" || def.Connection.Password != "[REDACTED]" ||
		def.Source != "env DATABASE_URL" || rep.Connection.Password != "[REDACTED]" || !rep.Policy.ReadOnly || rep.Policy.DefaultLimit != 1000 ||
		def.Policy.PreparedStatements == nil || !*def.Policy.PreparedStatements || rep.Policy.PreparedStatements == nil || *rep.Policy.PreparedStatements {
		t.Errorf("effective config not as configured:\n%s", out)
	}
}

// TestN8NTaskTimeout: unset is n8n 3's 60 s; a value n8n could not mean (seconds given as
// milliseconds, or negative) is refused with the unit spelled out.
func TestN8NTaskTimeout(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		ms      int64
		want    int64
		refused bool
	}{{0, 60_000, false}, {120_000, 120_000, false}, {60, 0, true}, {-1, 0, true}} {
		cfg := &Config{Databases: map[string]DatabaseConfig{"default": {URL: "postgres://pgtools@127.0.0.1:5432/app"}},
			N8N: N8NConfig{TaskTimeoutMS: c.ms}}
		err := cfg.Validate()
		if c.refused {
			if err == nil || !strings.Contains(err.Error(), "n8n.task_timeout_ms") || !strings.Contains(err.Error(), "60000") {
				t.Errorf("task_timeout_ms %d: err %v, want a refusal naming the key and the unit", c.ms, err)
			}
			continue
		}
		if err != nil || cfg.N8N.TaskTimeoutMS != c.want {
			t.Errorf("task_timeout_ms %d: got %d, err %v; want %d", c.ms, cfg.N8N.TaskTimeoutMS, err, c.want)
		}
	}
}
