package config

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/schemas"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/approval"
)

// approvalConfig is a config document with one database under rules, a token with tokenRules,
// and one read and one write custom tool.
func approvalConfig(rules, tokenRules string) string {
	return `{"databases": {"default": {"url": "postgres://u@127.0.0.1/db", "policy": {"require_approval": ` + rules + `}}},
	  "tokens": [{"name": "agent", "token": "agent-token-0123456789", "scopes": ["read", "write"], "require_approval": ` + tokenRules + `},
	    {"name": "boss", "token": "boss-token-0123456789ab", "scopes": ["approve"]}],
	  "custom_tools": [{"name": "close_month", "description": "d", "sql": "UPDATE t SET closed = true", "mode": "write"},
	    {"name": "month_total", "description": "d", "sql": "SELECT 1"}]}`
}

// TestApprovalRulesConfig: every rule, the databases' and the tokens', is checked at load and
// a wrong one is reported on a line naming its path and the fix; a tool rule must name a tool
// that writes (a built-in write tool or a custom tool of mode write).
func TestApprovalRulesConfig(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, rules, tokenRules string
		want                    []string // each must appear in one problem line; none: valid
	}{
		{"every kind", `[{"when": "rows_over", "rows": 100}, {"when": "ddl"}, {"when": "destructive"}, {"when": "table", "table": "public.orders"},
			{"when": "tool", "tool": "delete_data"}, {"when": "tool", "tool": "close_month"}]`, `[{"when": "rows_over", "rows": 0}]`, nil},
		{"unknown kind", `[{"when": "sometimes"}]`, `[]`, []string{`databases.default.policy.require_approval[0].when: "sometimes" is not allowed`}},
		{"missing when", `[{"rows": 3}]`, `[]`, []string{`databases.default.policy.require_approval[0]: missing "when"`}},
		{"unknown key", `[{"when": "ddl", "limit": 3}]`, `[]`, []string{`databases.default.policy.require_approval[0].limit: unknown key`}},
		{"negative rows", `[{"when": "rows_over", "rows": -1}]`, `[]`, []string{`databases.default.policy.require_approval[0].rows`}},
		{"rows on ddl", `[{"when": "ddl"}, {"when": "ddl", "rows": 4}]`, `[]`,
			[]string{`databases.default.policy.require_approval[1]: ddl takes no rows (rows belongs to rows_over)`}},
		{"table without table", `[{"when": "table"}]`, `[]`, []string{`databases.default.policy.require_approval[0]: table needs "table"`}},
		{"tool on a read tool", `[{"when": "tool", "tool": "select_query"}]`, `[]`,
			[]string{`databases.default.policy.require_approval[0]: tool "select_query" is no tool that writes`, "close_month, delete_data, execute_sql, insert_data, pg_transaction, update_data"}},
		{"tool on a read custom tool", `[{"when": "tool", "tool": "month_total"}]`, `[]`,
			[]string{`databases.default.policy.require_approval[0]: tool "month_total" is no tool that writes`}},
		{"tool on no tool", `[]`, `[{"when": "tool", "tool": "drop_everything"}]`,
			[]string{`token "agent" (config file tokens[0]): require_approval[0]: tool "drop_everything" is no tool that writes`}},
		{"token rule", `[]`, `[{"when": "table"}]`, []string{`token "agent" (config file tokens[0]): require_approval[0]: table needs "table"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			problems := configProblems(t, approvalConfig(c.rules, c.tokenRules))
			if len(c.want) == 0 && len(problems) > 0 {
				t.Fatalf("valid rules refused: %q", problems)
			}
			for _, w := range c.want {
				if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, w) }) {
					t.Errorf("no problem line says %q: %q", w, problems)
				}
			}
		})
	}
}

// TestApprovalRulesGoPath: a configuration built in Go (flags, tests) gets the same checks as a
// file: Validate refuses a rule the schema never saw.
func TestApprovalRulesGoPath(t *testing.T) {
	t.Parallel()
	cfg := &Config{Databases: map[string]DatabaseConfig{"default": {URL: "postgres://u@127.0.0.1/db",
		Policy: tools.Policy{RequireApproval: []approval.Rule{{When: "sometimes"}, {When: approval.WhenTool, Tool: "describe_schema"}}}}}}
	err := cfg.Validate()
	for _, w := range []string{`databases.default.policy.require_approval[0]: unknown when "sometimes"`, `databases.default.policy.require_approval[1]: tool "describe_schema" is no tool that writes`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Validate: %v, want a line with %q", err, w)
		}
	}
}

// TestApprovalKindsMatchSchema: the schema offers exactly the kinds tools knows, so a kind added
// in Go is configurable and the schema names none Go would refuse.
func TestApprovalKindsMatchSchema(t *testing.T) {
	t.Parallel()
	var doc struct {
		Defs map[string]struct {
			Properties map[string]struct {
				Enum []string `json:"enum"`
			} `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(schemas.Config(), &doc); err != nil {
		t.Fatal(err)
	}
	if got := doc.Defs["approval_rule"].Properties["when"].Enum; !slices.Equal(got, approval.Kinds()) {
		t.Fatalf("schema's when enum %v, approval.Kinds %v", got, approval.Kinds())
	}
	// Every kind, configured as its one valid form, loads.
	forms := map[string]string{approval.WhenRowsOver: `"rows": 1`, approval.WhenTable: `"table": "t"`, approval.WhenTool: `"tool": "insert_data"`}
	for _, kind := range approval.Kinds() {
		extra := ""
		if f, ok := forms[kind]; ok {
			extra = ", " + f
		}
		if problems := configProblems(t, approvalConfig(fmt.Sprintf(`[{"when": %q%s}]`, kind, extra), `[]`)); len(problems) > 0 {
			t.Errorf("kind %s: %q", kind, problems)
		}
	}
}

// TestApproveScope: the approve scope is accepted in the config file and in --token specs, and
// the approvals settings take their defaults.
func TestApproveScope(t *testing.T) {
	t.Parallel()
	toks, err := ParseTokens([]string{"boss-token-0123456789ab:approve;agent-token-0123456789:read,write:agent_role"}, 0)
	if err != nil || !slices.Equal(toks[0].Scopes, []string{"approve"}) || toks[1].Role != "agent_role" {
		t.Fatalf("ParseTokens: %+v %v", toks, err)
	}
	cfg := &Config{Databases: map[string]DatabaseConfig{"default": {URL: "postgres://u@127.0.0.1/db"}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Approvals.TTL() != DefaultApprovalTTL || cfg.Approvals.MaxPending != DefaultApprovalMaxPending {
		t.Fatalf("approvals defaults: %+v", cfg.Approvals)
	}
}

// TestApprovalNotes: check-config and serve say nothing new about approvers and approval rules
// unless something is wrong: an approve-only token shares no database role with the others
// (it runs no statement), the approve scope does not tell two tokens' roles apart, and a
// database whose rules no token may approve is named.
func TestApprovalNotes(t *testing.T) {
	t.Parallel()
	load := func(doc string) *Config {
		t.Helper()
		cfg, err := LoadConfigFile(apitest.WriteFile(t, t.TempDir(), "pgtools.json", doc))
		if err == nil {
			err = cfg.Validate()
		}
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	cfg := load(approvalConfig(`[{"when": "rows_over", "rows": 100}]`, `[]`))
	if notes := cfg.SharedRoleNotes(); len(notes) > 0 {
		t.Errorf("an approver token is said to share the caller's role: %q", notes)
	}
	if note := cfg.ApprovalsNote(); note != "" {
		t.Errorf("a note with an approver configured: %s", note)
	}
	const db = `"databases": {"default": {"url": "postgres://u@127.0.0.1/db", "policy": {"require_approval": [{"when": "ddl"}]}},
	  "other": {"url": "postgres://u@127.0.0.1/other"}}`
	cfg = load(`{` + db + `, "tokens": [{"name": "a", "token": "a-token-0123456789ab", "scopes": ["read", "write", "approve"]},
	  {"name": "b", "token": "b-token-0123456789ab", "scopes": ["write", "read"]}]}`)
	if notes := cfg.SharedRoleNotes(); len(notes) > 0 {
		t.Errorf("the approve scope told two tokens' roles apart: %q", notes)
	}
	cfg = load(`{` + db + `, "tokens": [{"name": "a", "token": "a-token-0123456789ab", "scopes": ["read", "write"], "require_approval": [{"when": "ddl"}]},
	  {"name": "boss", "token": "b-token-0123456789ab", "scopes": ["approve"], "databases": ["other"]}]}`)
	if note := cfg.ApprovalsNote(); !strings.Contains(note, "on databases default, but") {
		t.Errorf("rules nobody may approve on default (the approver may use other only): %q", note)
	}
}

// TestUnapprovableOnStdio: under pgtools mcp, rules no one can satisfy are those of databases
// without approval_by_client; the setting loads from the config file.
func TestUnapprovableOnStdio(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfigFile(apitest.WriteFile(t, t.TempDir(), "pgtools.json", `{"databases": {
	  "a": {"url": "postgres://u@127.0.0.1/a", "policy": {"require_approval": [{"when": "ddl"}]}},
	  "b": {"url": "postgres://u@127.0.0.1/b", "policy": {"require_approval": [{"when": "ddl"}], "approval_by_client": true}},
	  "c": {"url": "postgres://u@127.0.0.1/c"}}}`))
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.UnapprovableOnStdio(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("UnapprovableOnStdio = %v, want [a]", got)
	}
	if !cfg.Databases["b"].Policy.ApprovalByClient {
		t.Fatal("approval_by_client did not load")
	}
}

// TestApprovalsDocConfig: the configuration docs/approvals.md shows is valid, rules included.
func TestApprovalsDocConfig(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../docs/approvals.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(raw), "```json\n{\n  \"tokens\"")
	block, _, _ = strings.Cut(block, "```")
	if !ok {
		t.Fatal("docs/approvals.md has no configuration example")
	}
	doc := []byte("{\n  \"tokens\"" + block)
	if err := ValidateConfig(doc); err != nil {
		t.Fatal(err)
	}
	var cfg Config
	if err := json.Unmarshal(doc, &cfg); err != nil {
		t.Fatal(err)
	}
	if problems := cfg.approvalProblems(); len(problems) > 0 || len(cfg.Databases["default"].Policy.RequireApproval) != 2 || cfg.ApprovalsNote() != "" {
		t.Fatalf("the documented approvals config: %q", problems)
	}
}
