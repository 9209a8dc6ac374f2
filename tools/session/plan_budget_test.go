package session_test

import (
	"testing"

	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/session"
)

// TestPlanBudgetInSession: inside a session the plan is made in the session's transaction; a
// statement over the budget is refused before it runs, and the session goes on.
func TestPlanBudgetInSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{}, tools.Policy{MaxEstimatedRows: 2})
	f.db.Exec(t, "ANALYZE accounts")
	id := f.begin(t, alice, "")
	sid := `"session_id":"` + id + `"`
	f.fail(t, tools.ErrTooExpensive, alice, "execute_sql", `{"sql":"update accounts set balance = balance + 1","mode":"write",`+sid+`}`)
	f.fail(t, tools.ErrTooExpensive, alice, "select_query", `{"table":"accounts",`+sid+`}`)
	f.must(t, alice, "update_data", `{"table":"accounts","set":{"balance":7},"where":"id = $1","params":[3],`+sid+`}`)
	f.must(t, alice, "pg_tx", `{"action":"commit",`+sid+`}`)
	if got := f.db.QueryInt(t, "select sum(balance) from accounts"); got != 157 {
		t.Fatalf("sum of balances %d, want 157: only the update within budget ran", got)
	}
}
