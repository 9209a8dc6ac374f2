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

// TestSubjectsShareTheirOwnersSessions: the end users of one act-as token hold at most the
// token's share together and each at most a subject share within it; a refusal names the share
// that is full and lists only the caller's own sessions; another token still begins.
func TestSubjectsShareTheirOwnersSessions(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{MaxSessions: 6, MaxPerPrincipal: 3, MaxPerSubject: 2, TTL: time.Minute}, tools.Policy{})
	subject := func(name string) tools.Principal {
		return tools.Principal{Name: "hub:" + name, Quota: "hub", Scopes: []string{"read", "write"}}
	}
	s0 := []string{f.begin(t, subject("s0"), ""), f.begin(t, subject("s0"), "")}
	e := f.fail(t, tools.ErrSessionLimitReached, subject("s0"), "pg_tx", `{"action":"begin"}`)
	if !strings.Contains(e.Message, `2 of your 2 sessions, the most one user of "hub"`) || !strings.Contains(e.Suggestion, "max_sessions_per_subject") ||
		!strings.Contains(e.Suggestion, s0[0]) || !strings.Contains(e.Suggestion, s0[1]) {
		t.Fatalf("subject share refusal: %s / %s", e.Message, e.Suggestion)
	}
	checkGolden(t, "session_limit_reached-subject-share", e)
	s1 := f.begin(t, subject("s1"), "")
	e = f.fail(t, tools.ErrSessionLimitReached, subject("s2"), "pg_tx", `{"action":"begin"}`)
	if !strings.Contains(e.Message, `All 3 sessions of "hub"`) || !strings.Contains(e.Suggestion, "max_sessions_per_principal") {
		t.Fatalf("owner share refusal: %s / %s", e.Message, e.Suggestion)
	}
	checkGolden(t, "session_limit_reached-owner-share", e)
	e = f.fail(t, tools.ErrSessionLimitReached, subject("s1"), "pg_tx", `{"action":"begin"}`)
	if !strings.Contains(e.Suggestion, s1) || strings.Contains(e.Suggestion, s0[0]) {
		t.Fatalf("a subject's refusal must list its own sessions only: %s", e.Suggestion)
	}
	f.begin(t, alice, "")
	// Ending a subject's session gives the slot back to the token and the subject.
	f.must(t, subject("s0"), "pg_tx", fmt.Sprintf(`{"action":"rollback","session_id":%q}`, s0[0]))
	f.begin(t, subject("s2"), "")
	f.clock.Add(2 * time.Minute)
	f.mgr.Sweep()
	for _, s := range []string{"s0", "s0", "s1"} {
		f.begin(t, subject(s), "")
	}
	f.waitBackends(t, 3)
}
