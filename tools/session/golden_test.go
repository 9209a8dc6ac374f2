package session_test

import (
	"flag"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/session"
)

var update = flag.Bool("update", false, "rewrite golden files")

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// TestSessionErrorGolden pins the session errors a model reads (ids replaced by a placeholder).
// Rewrite with go test ./tools/session -run Golden -update and review the diff.
func TestSessionErrorGolden(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{MaxSessions: 2, MaxPerPrincipal: 1, TTL: time.Minute}, tools.Policy{})
	id := f.begin(t, alice, "")
	f.begin(t, tools.Principal{Name: "dave", Scopes: []string{"read"}}, `,"read_only":true`)
	cases := map[string]func() *tools.Error{
		"session_limit_reached": func() *tools.Error {
			return f.fail(t, tools.ErrSessionLimitReached, tools.Principal{Name: "carol", Scopes: []string{"read"}}, "pg_tx", `{"action":"begin","read_only":true}`)
		},
		"session_limit_reached-own-quota": func() *tools.Error {
			return f.fail(t, tools.ErrSessionLimitReached, alice, "pg_tx", `{"action":"begin"}`)
		},
		"session_not_found": func() *tools.Error {
			return f.fail(t, tools.ErrSessionNotFound, bob, "select_query", fmt.Sprintf(`{"table":"accounts","session_id":%q}`, id))
		},
		"session_expired": func() *tools.Error {
			f.clock.Add(2 * time.Minute)
			f.mgr.Sweep()
			return f.fail(t, tools.ErrSessionExpired, alice, "select_query", fmt.Sprintf(`{"table":"accounts","session_id":%q}`, id))
		},
	}
	for _, name := range []string{"session_limit_reached", "session_limit_reached-own-quota", "session_not_found", "session_expired"} {
		checkGolden(t, name, cases[name]())
	}
}
