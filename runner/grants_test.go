package runner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/config"
)

// TestActingRoles: every role a caller can act as is checked at start, on the databases it may
// use: the login role ("") for a token without a role and for open access, act_as and JWT roles
// as shared by many subjects.
func TestActingRoles(t *testing.T) {
	t.Parallel()
	dbs := map[string]config.DatabaseConfig{"default": {URL: "postgres://x@h/a"}, "reports": {URL: "postgres://x@h/r"}}
	c := &config.Config{Databases: dbs, Tokens: []auth.Token{
		{Name: "plain", Databases: []string{"default"}},
		{Name: "reader", Role: "r1", Databases: []string{"reports"}},
		{Name: "hub", ActAs: true, Databases: []string{"default"}},
		{Name: "crm", Role: "r1", ActAs: true, ActAsRole: "r2"},
	}, JWT: &auth.JWTConfig{Roles: []string{"r3"}, Databases: []string{"reports"}}}
	got := c.ActingRoles(config.ExtraCaller{Name: "broker", Role: "r4"})
	want := map[string][]config.RoleUse{
		"default": {{Role: "", Shared: true, By: []string{"token plain", "token hub", "token hub (act_as)"}},
			{Role: "r1", By: []string{"token crm"}}, {Role: "r2", Shared: true, By: []string{"token crm (act_as)"}},
			{Role: "r4", By: []string{"broker"}}},
		"reports": {{Role: "r1", By: []string{"token reader", "token crm"}}, {Role: "r2", Shared: true, By: []string{"token crm (act_as)"}},
			{Role: "r3", Shared: true, By: []string{"jwt"}}, {Role: "r4", By: []string{"broker"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ActingRoles:\n got %+v\nwant %+v", got, want)
	}
	open := &config.Config{Databases: dbs}
	if got := open.ActingRoles(); len(got["default"]) != 1 || got["default"][0].Role != "" || got["reports"][0].Role != "" {
		t.Fatalf("open access: %+v", got)
	}
	if got := open.LoginRoleUses("mcp"); len(got) != 2 || got["reports"][0].Role != "" {
		t.Fatalf("LoginRoleUses: %+v", got)
	}
}

// TestTableListsSetting: policy.table_lists flows from the file into the policy and back out in
// check-config's effective configuration, "enforced" by default.
func TestTableListsSetting(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "pgtools.json")
	os.WriteFile(file, []byte(`{"databases": {"a": {"url": "postgres://x@h/a", "policy": {"deny_tables": ["k"], "table_lists": "advisory"}},
		"b": {"url": "postgres://x@h/b"}}}`), 0o600)
	cfg, err := config.LoadConfigFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if p := cfg.Databases["a"].Policy; p.TableLists != "advisory" || p.TableListsAreGrants() {
		t.Fatalf("policy a: %+v", p)
	}
	raw, err := cfg.EffectiveJSON()
	if err != nil {
		t.Fatal(err)
	}
	var eff struct {
		Databases map[string]struct {
			Policy struct {
				TableLists string `json:"table_lists"`
			}
		}
	}
	if err := json.Unmarshal(raw, &eff); err != nil {
		t.Fatal(err)
	}
	if eff.Databases["a"].Policy.TableLists != "advisory" || eff.Databases["b"].Policy.TableLists != "enforced" {
		t.Fatalf("effective table_lists: %s", raw)
	}
}
