package session_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/session"
)

// TestReadTokenCannotTakeEverySessionSlot is issue 12's hog: a read-only token opening read_only
// sessions until the slots run out. Its quota stops it at its share, the refusal names its own
// quota and lists its sessions, and a write token can still begin. Freeing one of its sessions
// (commit, rollback or expiry) gives the quota back.
func TestReadTokenCannotTakeEverySessionSlot(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{MaxSessions: 4, MaxPerPrincipal: 2, TTL: time.Minute}, tools.Policy{})
	reader := tools.Principal{Name: "reader", Scopes: []string{"read"}}
	var ids []string
	for i := 0; i < 2; i++ {
		ids = append(ids, f.begin(t, reader, `,"read_only":true`))
	}
	for i := 0; i < 3; i++ {
		e := f.fail(t, tools.ErrSessionLimitReached, reader, "pg_tx", `{"action":"begin","read_only":true}`)
		if !strings.Contains(e.Message, "2 of your 2") || !strings.Contains(e.Suggestion, ids[0]) || !strings.Contains(e.Suggestion, ids[1]) {
			t.Fatalf("quota refusal does not name the caller's quota and sessions: %s / %s", e.Message, e.Suggestion)
		}
	}
	if n := f.sessionBackends(t); n != 2 {
		t.Fatalf("%d session backends, want the reader's 2", n)
	}
	w := f.begin(t, alice, "")
	f.must(t, alice, "update_data", fmt.Sprintf(`{"table":"accounts","set":{"balance":1},"where":"id = 1","session_id":%q}`, w))
	f.must(t, alice, "pg_tx", fmt.Sprintf(`{"action":"commit","session_id":%q}`, w))
	if f.balance(t, 1) != 1 {
		t.Fatal("the write token's session did not commit")
	}
	// The quota comes back as the reader's sessions end.
	f.must(t, reader, "pg_tx", fmt.Sprintf(`{"action":"rollback","session_id":%q}`, ids[0]))
	ids[0] = f.begin(t, reader, `,"read_only":true`)
	f.clock.Add(2 * time.Minute)
	f.mgr.Sweep()
	f.begin(t, reader, `,"read_only":true`)
	f.begin(t, reader, `,"read_only":true`)
	// The total still binds when every principal stays within its quota.
	f.begin(t, bob, "")
	f.begin(t, bob, "")
	e := f.fail(t, tools.ErrSessionLimitReached, alice, "pg_tx", `{"action":"begin"}`)
	if !strings.Contains(e.Message, "All 4 session slots") {
		t.Fatalf("total limit: %s", e.Message)
	}
}

// TestSessionQuotaDefaultsToAllSlots: without MaxPerPrincipal one principal may use every slot
// (the single-principal case).
func TestSessionQuotaDefaultsToAllSlots(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{MaxSessions: 3}, tools.Policy{})
	for i := 0; i < 3; i++ {
		f.begin(t, alice, "")
	}
	e := f.fail(t, tools.ErrSessionLimitReached, alice, "pg_tx", `{"action":"begin"}`)
	if !strings.Contains(e.Message, "3 of your 3") {
		t.Fatalf("got %s", e.Message)
	}
}
