package config_test

import (
	"strings"
	"testing"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/runnertest"
)

func TestConfigRefusesOpenNonLoopback(t *testing.T) {
	t.Parallel()
	dbs := map[string]config.DatabaseConfig{"default": {URL: "postgres://x@127.0.0.1/x"}}
	cases := []struct {
		listen string
		tokens []auth.Token
		ok     bool
	}{
		{"127.0.0.1:8080", nil, true},
		{"localhost:8080", nil, true},
		{"[::1]:8080", nil, true},
		{"0.0.0.0:8080", nil, false},
		{":8080", nil, false},
		{"192.168.1.10:8080", nil, false},
		{"0.0.0.0:8080", []auth.Token{{Secret: runnertest.ReadToken, Name: "a", Scopes: []string{"read"}}}, true},
	}
	for _, c := range cases {
		cfg := &config.Config{Listen: c.listen, Tokens: c.tokens, Databases: dbs}
		err := cfg.Validate()
		if (err == nil) != c.ok {
			t.Errorf("listen %s with %d tokens: err=%v, want ok=%v", c.listen, len(c.tokens), err, c.ok)
		}
	}
}

func TestParseTokens(t *testing.T) {
	t.Parallel()
	toks, err := config.ParseTokens([]string{"aaaaaaaaaaaaaaaa:read,write;bbbbbbbbbbbbbbbb:read"}, 0)
	if err != nil || len(toks) != 2 || toks[0].Name != "token-1" || len(toks[0].Scopes) != 2 || toks[1].Scopes[0] != "read" {
		t.Fatalf("ParseTokens: %v %+v", err, toks)
	}
	for _, bad := range []string{"short:read", "aaaaaaaaaaaaaaaa:admin", "aaaaaaaaaaaaaaaa"} {
		if _, err := config.ParseTokens([]string{bad}, 0); err == nil {
			t.Errorf("ParseTokens(%q) accepted", bad)
		} else if strings.Contains(err.Error(), "aaaaaaaaaaaaaaaa") {
			t.Errorf("ParseTokens error echoes the secret: %v", err)
		}
	}
}
