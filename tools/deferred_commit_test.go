package tools

import (
	"context"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/tools/session"
)

// TestDeferredConstraintFailsAtCommit: a deferred constraint is checked by the SET CONSTRAINTS
// ALL IMMEDIATE that now precedes the reset and COMMIT, rather than by COMMIT itself. Every path
// still answers constraint_violation with nothing committed, and the pooled connection still
// serves the next call.
func TestDeferredConstraintFailsAtCommit(t *testing.T) {
	t.Parallel()
	b := newBundleConns(t, Policy{}, 1)
	b.db.Exec(t, `CREATE TABLE d (id int, CONSTRAINT d_once UNIQUE (id) DEFERRABLE INITIALLY DEFERRED);
		GRANT SELECT, INSERT ON d TO `+quoteIdent(b.db.RoleName("agent")))
	mgr := session.New(session.Config{})
	t.Cleanup(func() { mgr.Close(context.Background()) })
	b.reg.setSessions(mgr)

	e := b.mustFail(t, ErrConstraint, "execute_sql", `{"sql":"INSERT INTO d VALUES (1), (1)","mode":"write","autocommit":true}`)
	if e.SQLState != "23505" {
		t.Errorf("autocommit: SQLSTATE %s, want 23505", e.SQLState)
	}
	b.mustFail(t, ErrConstraint, "pg_transaction", `{"operations":[{"sql":"INSERT INTO d VALUES (2)"},{"sql":"INSERT INTO d VALUES (2)"}]}`)

	out := b.mustCall(t, "pg_tx", `{"action":"begin"}`)
	id := out["session_id"].(string)
	b.mustCall(t, "execute_sql", `{"sql":"INSERT INTO d VALUES (3), (3)","mode":"write","session_id":"`+id+`"}`)
	b.mustFail(t, ErrConstraint, "pg_tx", `{"action":"commit","session_id":"`+id+`"}`)
	if n := mgr.Open(); n != 0 {
		t.Errorf("%d sessions open after the failed commit, want 0", n)
	}

	if n := b.db.QueryInt(t, "SELECT count(*) FROM d"); n != 0 {
		t.Errorf("%d rows after failed commits, want 0", n)
	}
	b.mustCall(t, "execute_sql", `{"sql":"INSERT INTO d VALUES (4)","mode":"write","autocommit":true}`)
	if n := b.db.QueryInt(t, "SELECT count(*) FROM d"); n != 1 {
		t.Errorf("%d rows after the next write, want 1", n)
	}
}

// TestSessionCommitOnEndedBackendIsLost keeps the other side of TestDeferredConstraintFailsAtCommit:
// a commit whose backend was terminated is the lost session it always was.
func TestSessionCommitOnEndedBackendIsLost(t *testing.T) {
	t.Parallel()
	b := newBundleConns(t, Policy{}, 1)
	mgr := session.New(session.Config{})
	t.Cleanup(func() { mgr.Close(context.Background()) })
	b.reg.setSessions(mgr)
	id := b.mustCall(t, "pg_tx", `{"action":"begin"}`)["session_id"].(string)
	if n := b.db.QueryInt(t, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'pgtools-session/tester/pg_tx'"); n != 1 {
		t.Fatalf("terminated %d session backends, want 1", n)
	}
	e := b.mustFail(t, ErrConnection, "pg_tx", `{"action":"commit","session_id":"`+id+`"}`)
	if !strings.Contains(e.Message, "was lost") {
		t.Errorf("commit on an ended backend: %s", e.Message)
	}
}
