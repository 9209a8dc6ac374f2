package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/session"
)

// answerMasks replace a session answer's ids and execution time.
var answerMasks = []pgtest.Mask{
	{Re: uuidRE, With: "<session-id>"},
	{Re: regexp.MustCompile(`"executionTime":"[^"]*"`), With: `"executionTime":"<time>"`},
}

// TestSessionAnswerGolden pins every pg_tx answer (begin, list, savepoint, release, rollback_to,
// commit, rollback) and the active_session echo of calls in a session (a write; a read near
// expiry), key order included, byte for byte as a transport sends them (session ids and execution
// times replaced by placeholders; the clock is fixed). The stateless answers are pinned in
// tools (TestAnswerGolden). Rewrite with go test ./tools/session -run Golden -update and review
// the diff.
func TestSessionAnswerGolden(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{TTL: 30 * time.Minute}, tools.Policy{})
	var id string
	for _, c := range []struct {
		name, tool, args string
		before           func() // runs before the call
	}{
		{name: "pg_tx-begin", tool: "pg_tx", args: `{"action":"begin","isolation_level":"repeatable read"}`},
		{name: "pg_tx-list", tool: "pg_tx", args: `{"action":"list"}`},
		{name: "select_query-session", tool: "select_query", args: `{"table":"accounts","where":"id = 1","session_id":"<id>"}`},
		{name: "update_data-session", tool: "update_data", args: `{"table":"accounts","set":{"balance":70},"where":"id = 1","session_id":"<id>"}`},
		{name: "execute_sql-write-session", tool: "execute_sql", args: `{"sql":"update accounts set balance = balance + 1 where id = 2","mode":"write","session_id":"<id>"}`},
		{name: "pg_tx-savepoint", tool: "pg_tx", args: `{"action":"savepoint","name":"a","session_id":"<id>"}`},
		{name: "pg_tx-rollback_to", tool: "pg_tx", args: `{"action":"rollback_to","name":"a","session_id":"<id>"}`},
		{name: "pg_tx-release", tool: "pg_tx", args: `{"action":"release","name":"a","session_id":"<id>"}`},
		{name: "select_query-session-expiring", tool: "select_query", args: `{"table":"accounts","columns":"id","where":"id = 1","session_id":"<id>"}`,
			before: func() { f.clock.Add(27 * time.Minute) }},
		{name: "pg_tx-commit", tool: "pg_tx", args: `{"action":"commit","session_id":"<id>"}`},
		{name: "pg_tx-begin-read_only", tool: "pg_tx", args: `{"action":"begin","read_only":true}`},
		{name: "pg_tx-rollback", tool: "pg_tx", args: `{"action":"rollback","session_id":"<id>"}`},
	} {
		if c.before != nil {
			c.before()
		}
		args := bytes.ReplaceAll([]byte(c.args), []byte("<id>"), []byte(id))
		res, _, e := f.reg.Call(context.Background(), alice, c.tool, args)
		if e != nil {
			t.Fatalf("%s: %s (%s) — %s", c.name, e.Message, e.Type, e.Suggestion)
		}
		raw, err := res.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var begun struct {
			Action    string `json:"action"`
			SessionID string `json:"session_id"`
		}
		if err := json.Unmarshal(raw, &begun); err == nil && begun.Action == "begin" {
			id = begun.SessionID
		}
		pgtest.GoldenAnswer(t, filepath.Join("testdata", "answers", c.name+".golden"), raw, *update, answerMasks...)
	}
}
