package mcpapi_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/runner/mcptest"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/approval"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/toolstest"
)

// newMCPApprovals is the MCP feature fixture under the rule "writes that change more than 100
// rows", with clients allowed to approve their own requests (byClient) or not.
func newMCPApprovals(t *testing.T, byClient bool) *mcpFeatures {
	t.Helper()
	db := pgtest.New(t)
	dsn := db.RoleDSN(t, "mcpa")
	role := `"` + db.RoleName("mcpa") + `"`
	db.Exec(t, mcptest.Fixture)
	db.Exec(t, `CREATE TABLE big (id int PRIMARY KEY, v text); INSERT INTO big SELECT i, 'x' FROM generate_series(1, 150) i; ALTER TABLE big OWNER TO `+role)
	reg := toolstest.Registry(t, dsn, tools.Policy{RequireApproval: []approval.Rule{{When: approval.WhenRowsOver, Rows: 100}}, ApprovalByClient: byClient}, 4)
	srv := httptest.NewServer(httpapi.NewHandler(reg, []auth.Token{{Secret: ddlToken, Name: "ddl", Scopes: []string{"read", "write", "ddl"}}}, zerolog.Nop(), 1<<20))
	t.Cleanup(srv.Close)
	return &mcpFeatures{db: db, reg: reg, url: srv.URL}
}

// TestMCPClientApproves: where policy.approval_by_client allows it, a client that can ask its
// user turns approval_required into a question carrying the measured effect; accept runs the
// call once with the approval (recorded as the client's user's), decline denies the request and
// changes nothing. Without the setting the client's user is not asked: the call answers
// approval_required. Over stdio-like transports at both protocol generations and over
// Streamable HTTP (2026-07-28: multi-round-trip input requests).
func TestMCPClientApproves(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"stdio", "stdio 2025-11-25", "http"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			connect := func(f *mcpFeatures, e *runnertest.Elicitor) *mcp.ClientSession {
				opts := &mcp.ClientOptions{ElicitationHandler: e.Handle}
				if transport == "http" {
					return f.overHTTP(t, opts)
				}
				_, v, _ := strings.Cut(transport, " ")
				return f.stdioLikeVersion(t, opts, v)
			}
			// execute_sql is not counted by the confirmation step: the approval is the question.
			sqlDel := map[string]any{"sql": "DELETE FROM big WHERE id > $1", "params": []any{30}, "mode": "write", "autocommit": true}
			del := map[string]any{"table": "big", "where": "id > $1", "params": []any{30}, "autocommit": true}

			f := newMCPApprovals(t, true)
			no := &runnertest.Elicitor{Action: "decline"}
			out := runnertest.CallOut(t, connect(f, no), "execute_sql", sqlDel)
			if !out.IsError || out.Object["errorType"] != "not_allowed" || !strings.Contains(out.Text, "denied") || f.db.QueryInt(t, "SELECT count(*) FROM big") != 150 {
				t.Fatalf("declined: %s", out.Text)
			}
			if q := no.Questions(); len(q) != 1 || !strings.Contains(q[0], "120 rows of public.big") {
				t.Fatalf("the question: %q", q)
			}
			if c := f.reg.Approvals().Counts(); c.Events["denied"] != 1 || c.Pending != 0 {
				t.Fatalf("after the decline: %+v", c)
			}
			yes := &runnertest.Elicitor{Action: "accept"}
			out = runnertest.CallOut(t, connect(f, yes), "execute_sql", sqlDel)
			if out.IsError || f.db.QueryInt(t, "SELECT count(*) FROM big") != 30 || len(yes.Questions()) != 1 {
				t.Fatalf("accepted: %s, asked %q", out.Text, yes.Questions())
			}
			if c := f.reg.Approvals().Counts(); c.Events["approved"] != 1 || c.Events["used"] != 1 {
				t.Fatalf("after the accept: %+v", c)
			}
			// delete_data over the confirmation threshold asks once: the confirmation of its
			// counted rows is the client's approval.
			f.db.Exec(t, "INSERT INTO big SELECT i, 'x' FROM generate_series(31, 150) i")
			once := &runnertest.Elicitor{Action: "accept"}
			out = runnertest.CallOut(t, connect(f, once), "delete_data", del)
			if out.IsError || out.Object["affectedRows"] != float64(120) || f.db.QueryInt(t, "SELECT count(*) FROM big") != 30 || len(once.Questions()) != 1 {
				t.Fatalf("confirmed delete: %s, asked %q", out.Text, once.Questions())
			}
			if c := f.reg.Approvals().Counts(); c.Events["approved"] != 2 || c.Events["used"] != 2 {
				t.Fatalf("after the confirmed delete: %+v", c)
			}

			// Without approval_by_client nobody on the client is asked to approve, and a
			// confirmation does not approve.
			g := newMCPApprovals(t, false)
			asked := &runnertest.Elicitor{Action: "accept"}
			cs := connect(g, asked)
			for i, c := range []struct {
				tool string
				args map[string]any
			}{{"execute_sql", sqlDel}, {"delete_data", del}} {
				out = runnertest.CallOut(t, cs, c.tool, c.args)
				if !out.IsError || out.Object["errorType"] != "approval_required" || len(asked.Questions()) != i || g.db.QueryInt(t, "SELECT count(*) FROM big") != 150 {
					t.Fatalf("%s without approval_by_client: %s, asked %q", c.tool, out.Text, asked.Questions())
				}
				if ap, _ := out.Object["approval"].(map[string]any); ap == nil || !strings.HasPrefix(ap["id"].(string), "apr_") {
					t.Fatalf("approval_required without its request: %s", out.Text)
				}
			}
		})
	}
}
