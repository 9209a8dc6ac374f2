package config

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/runner/apitest"
)

// TestLoadAppliesTheOverlayBeforeValidating: flags and environment, as an Overlay, change the
// file's document before the one validation: a later change of a key wins, a URL replaces the
// file's url_file (which is then not read), tokens add up after the file's and are named by
// their place, and every value remembers where it came from.
func TestLoadAppliesTheOverlayBeforeValidating(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := apitest.WriteFile(t, dir, "pgtools.json", `{"listen": "127.0.0.1:7000",
	  "tokens": [{"name": "file", "token": "file-token-0123456789", "scopes": ["read"]}],
	  "databases": {"default": {"url_file": "/nonexistent/url"}, "reports": {"url": "postgres://r@127.0.0.1/r"}},
	  "n8n": {"token_file": "/nonexistent/n8n-token"}}`)
	var o Overlay
	o.Set("env PGTOOLS_LISTEN", "listen", "127.0.0.1:7001")
	o.Set("--listen", "listen", "127.0.0.1:7002")
	o.Set("env DATABASE_URL", "databases.default.url", "postgres://d@127.0.0.1/d")
	o.Remove("env DATABASE_URL", "databases.default.url_file")
	o.Set("--read-only", "databases.default.policy.read_only", true)
	o.Set("--statement-timeout", "databases.default.policy.statement_timeout_ms", int64(1500))
	o.Set("env N8N_RUNNERS_AUTH_TOKEN", "n8n.token", "n8n-token-from-the-environment")
	o.Remove("env N8N_RUNNERS_AUTH_TOKEN", "n8n.token_file")
	o.Add("--token", "tokens", map[string]any{"token": "flag-token-0123456789", "scopes": []string{"read", "write"}})
	cfg, err := Load(file, &o)
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.Databases["default"]
	if cfg.Listen != "127.0.0.1:7002" || d.URL != "postgres://d@127.0.0.1/d" || d.Origin != "env DATABASE_URL" ||
		!d.Policy.ReadOnly || d.Policy.StatementTimeout.Milliseconds() != 1500 || cfg.Databases["reports"].Origin != "config file" ||
		cfg.N8N.Token != "n8n-token-from-the-environment" || cfg.N8N.TokenFile != "" {
		t.Errorf("loaded %+v", cfg)
	}
	if len(cfg.Tokens) != 2 || cfg.Tokens[1].Name != "token-2" || cfg.Tokens[1].Origin != "--token" ||
		cfg.Tokens[0].Origin != "config file tokens[0]" || !slices.Equal(cfg.Tokens[1].Scopes, []string{"read", "write"}) {
		t.Errorf("tokens %+v", cfg.Tokens)
	}
	// Validate filled the defaults.
	if cfg.Databases["reports"].MaxConns != DefaultMaxConns || cfg.N8N.Principal != DefaultN8NPrincipal {
		t.Errorf("defaults not filled: %+v", cfg)
	}
	// Nothing but the file: the file's own keys, read as LoadConfigFile reads them.
	if _, err := Load(file, nil); err == nil || !strings.Contains(err.Error(), "databases.default.url_file: cannot read /nonexistent/url") {
		t.Errorf("the file alone: %v", err)
	}
}

// TestLoadNamesWhereAProblemCameFrom: a problem with a value a flag or variable gave starts with
// that flag or variable, whether the schema, the loader or Validate finds it; a problem of the
// file keeps the file's path.
func TestLoadNamesWhereAProblemCameFrom(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := `"databases": {"default": {"url": "postgres://u@127.0.0.1/d"}}`
	for _, c := range []struct {
		name, file string
		edit       func(*Overlay)
		want       []string
	}{
		{"a schema minimum", `{` + db + `}`, func(o *Overlay) {
			o.Set("--max-affected-rows", "databases.default.policy.max_affected_rows", 0)
		}, []string{"--max-affected-rows: 0 is too small; the minimum is 1"}},
		{"an unknown tool", `{` + db + `}`, func(o *Overlay) {
			o.Set("--disable-tools", "databases.default.policy.disabled_tools", []string{"execute_sql", "drop_everything"})
		}, []string{`--disable-tools: databases.default.policy.disabled_tools[1]: unknown tool "drop_everything"`}},
		{"Validate's check", `{` + db + `}`, func(o *Overlay) {
			o.Set("env PGTOOLS_LISTEN", "listen", "0.0.0.0:8080")
		}, []string{"env PGTOOLS_LISTEN: refusing to listen on 0.0.0.0:8080 without API tokens"}},
		{"an object only flags made", `{` + db + `}`, func(o *Overlay) {
			o.Set("--read-only", "databases.other.policy.read_only", true)
		}, []string{`databases.other (given only by --read-only): missing "url" or "url_file"`}},
		{"a secret file", `{` + db + `}`, func(o *Overlay) {
			o.Set("--n8n-broker-token-file", "n8n.token_file", "/nonexistent/token")
		}, []string{"--n8n-broker-token-file: cannot read /nonexistent/token"}},
		{"a broker without a token", `{` + db + `}`, func(o *Overlay) {
			o.Set("--n8n-broker", "n8n.brokers", []string{"http://127.0.0.1:5679", "http://127.0.0.1:5679"})
		}, []string{"--n8n-broker: joining n8n brokers needs the brokers' auth token", "--n8n-broker: n8n.brokers[1]: http://127.0.0.1:5679 is listed twice"}},
		{"the file's own", `{"listen": 8080, ` + db + `}`, func(o *Overlay) {
			o.Set("--read-only", "databases.default.policy.read_only", true)
		}, []string{"listen: must be a string, not a number"}},
		{"no database at all", ``, func(o *Overlay) {}, []string{"databases: needs at least 1 entry: no database configured; set DATABASE_URL"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := ""
			if c.file != "" {
				path = apitest.WriteFile(t, dir, strings.ReplaceAll(c.name, " ", "_")+".json", c.file)
			}
			var o Overlay
			c.edit(&o)
			_, err := Load(path, &o)
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *ConfigError", err)
			}
			for _, want := range c.want {
				if !slices.ContainsFunc(ce.Problems, func(p string) bool { return strings.HasPrefix(p, want) }) {
					t.Errorf("no problem starts with %q:\n%v", want, err)
				}
			}
		})
	}
}
