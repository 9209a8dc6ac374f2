package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExampleConfigsAreValid(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("../examples/config/*.json")
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
	secret := filepath.Join(dir, "token")
	os.WriteFile(secret, []byte("  file-token-0123456789abcdef\n"), 0o600)
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"tokens":[{"name":"a","token_file":"`+secret+`","scopes":["read"]}],
	  "databases":{"default":{"url":"postgres://u@127.0.0.1/db","policy":{"max_limit":50,"statement_timeout_ms":1500}}}}`), 0o600)
	cfg, err := LoadConfigFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Tokens[0].Secret != "file-token-0123456789abcdef" || cfg.Databases["default"].Policy.MaxLimit != 50 ||
		cfg.Databases["default"].Policy.StatementTimeout.Milliseconds() != 1500 {
		t.Fatalf("config not loaded as written: %+v", cfg)
	}

	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"listen": 8080, "tokenz": [], "databases": {"default": {"max_conns": "ten"}}}`), 0o600)
	_, err = LoadConfigFile(bad)
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	msg := err.Error()
	for _, want := range []string{"listen", "tokenz", "max_conns", "url"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not name %q:\n%s", want, msg)
		}
	}
	if lines := strings.Count(msg, "\n"); lines < 3 {
		t.Errorf("want one line per problem, got:\n%s", msg)
	}
}
