package config

import (
	"os"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/runner/apitest"
)

// TestChangesComparesEverySetting: Changes finds a changed value at its schema key and path,
// sees a rotated secret behind an unchanged *_file key, and finds nothing between two loads of
// the same configuration, or between a default left out and written out.
func TestChangesComparesEverySetting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	password := apitest.WriteFile(t, dir, "password", "first-password")
	doc := func(extra string) string {
		return `{"databases": {"main": {"url": "postgres://u@127.0.0.1/d", "password_file": "` + password + `"` + extra + `}},
		  "tokens": [{"name": "a", "token": "token-a-0123456789abcdef", "scopes": ["read"]}]}`
	}
	load := func(text string) *Config {
		t.Helper()
		cfg, err := Load(apitest.WriteFile(t, dir, "pgtools.json", text), nil)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	changes := func(was, now *Config) string {
		t.Helper()
		cs, err := Changes(was, now)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range cs {
			out = append(out, c.Key+"@"+c.Path)
		}
		return strings.Join(out, " ")
	}
	base := load(doc(""))
	if got := changes(base, load(doc(`, "max_conns": 10, "policy": {"max_affected_rows": 1000}`))); got != "" {
		t.Errorf("defaults written out: %s", got)
	}
	if got := changes(base, load(doc(`, "policy": {"read_only": true, "disabled_tools": ["pg_tx"]}`))); got !=
		"databases.*.policy.disabled_tools@databases.main.policy.disabled_tools databases.*.policy.read_only@databases.main.policy.read_only" {
		t.Errorf("policy changes: %s", got)
	}
	if err := os.WriteFile(password, []byte("second-password"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := changes(base, load(doc(""))); got != "databases.*.password_file@databases.main.password_file" {
		t.Errorf("a rotated password file: %s", got)
	}
	more := load(strings.Replace(doc(""), `"scopes": ["read"]}]`, `"scopes": ["read"]}, {"name": "b", "token": "token-b-0123456789abcdef", "scopes": ["read"]}]`, 1))
	if got := changes(base, more); !strings.Contains(got, "tokens.*.name@tokens[1].name") || strings.Contains(got, "tokens[0]") {
		t.Errorf("a token added: %s", got)
	}
	if got := changes(base, base); got != "" {
		t.Errorf("a config against itself: %s", got)
	}
}
