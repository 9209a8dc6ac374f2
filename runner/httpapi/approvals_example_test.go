package httpapi_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/runner/demodata"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/tools/pgtest"
)

// TestApprovalsExampleScript runs examples/curl/approvals.sh, the example of docs/approvals.md,
// as written, against a runner configured as that page says over the demo data: the script
// exits 1 on any answer other than the one it shows. It runs twice, as a reader might.
func TestApprovalsExampleScript(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	if err := demodata.Load(context.Background(), db.DSN, demodata.Options{EventRows: 10}); err != nil {
		t.Fatal(err)
	}
	dsn := db.RoleDSN(t, "aprex")
	db.Exec(t, `GRANT UPDATE ON orders TO "`+db.RoleName("aprex")+`"`)
	const caller, approver = "example-agent-token-0123456789", "example-approver-token-0123456789"
	doc := `{"tokens": [{"name": "agent", "token": "` + caller + `", "scopes": ["read", "write"]},
	    {"name": "ops-lead", "token": "` + approver + `", "scopes": ["approve"]}],
	  "databases": {"default": {"url": "` + dsn + `", "policy": {"require_approval": [{"when": "rows_over", "rows": 100}]}}}}`
	srv := runnertest.NewServerFixture(t, runnertest.ConfigDoc(t, doc)).HTTP
	for run := 1; run <= 2; run++ {
		script := exec.Command("bash", "../../examples/curl/approvals.sh")
		script.Env = append(os.Environ(), "PGTOOLS_URL="+srv.URL, "PGTOOLS_TOKEN="+caller, "PGTOOLS_APPROVER_TOKEN="+approver)
		out, err := script.CombinedOutput()
		if err != nil || !strings.Contains(string(out), `"affectedRows":150`) || !strings.Contains(string(out), `"approver":"ops-lead"`) {
			t.Fatalf("run %d of examples/curl/approvals.sh: %v\n%s", run, err, out)
		}
	}
	if n := db.QueryInt(t, "SELECT count(*) FROM orders WHERE note = 'bulk-reviewed'"); n != 150 {
		t.Fatalf("%d orders reviewed, want 150", n)
	}
}
