package tools

import (
	"strings"
	"testing"

	"github.com/pgtools/pgtools/tools/internal/wire"
)

// Helpers several test files of this package share. The bundle and its call helpers are in
// harness_test.go; the read path's fixture fingerprints in readpath_helpers_test.go.

// refused fails the test unless the call fails, and returns its error, of whatever type: the
// caller checks which.
func (b *bundle) refused(t testing.TB, tool, args string) *Error {
	t.Helper()
	out, e := b.call(t, tool, args)
	if e == nil {
		t.Fatalf("%s: succeeded: %v", tool, out)
	}
	return e
}

// countAtEnd checks, once the test and its parallel subtests are done, that the superuser's
// count query still answers want: the calls the test made, refused or read-only, wrote nothing.
// why names what a different count would mean.
func (b *bundle) countAtEnd(t testing.TB, query string, want int64, why string) {
	t.Helper()
	t.Cleanup(func() {
		if n := b.db.QueryInt(t, query); n != want {
			t.Errorf("%s gives %d, want %d: %s", query, n, want, why)
		}
	})
}

// redactCase is one message redactValues rewrites: args are the call's arguments as JSON, msg
// PostgreSQL's message, want the message the model is shown.
type redactCase struct {
	name, args, msg, want string
}

// checkRedactions runs redactValues on each case's message and on a suggestion quoting it.
func checkRedactions(t *testing.T, cases []redactCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var args map[string]any
			if err := wire.Unmarshal([]byte(c.args), &args); err != nil {
				t.Fatal(err)
			}
			e := &Error{Message: c.msg, Suggestion: "Check " + c.msg}
			redactValues(e, args)
			if e.Message != c.want || e.Suggestion != "Check "+c.want {
				t.Fatalf("got %q / %q, want %q", e.Message, e.Suggestion, c.want)
			}
		})
	}
}

// assertErrorSays reports (with Errorf, so every gap shows) each of inMessage that e's message
// lacks and each of inSuggestion that its suggestion lacks.
func assertErrorSays(t testing.TB, e *Error, inMessage, inSuggestion []string) {
	t.Helper()
	for _, s := range inMessage {
		if !strings.Contains(e.Message, s) {
			t.Errorf("message lacks %q: %s", s, e.Message)
		}
	}
	for _, s := range inSuggestion {
		if !strings.Contains(e.Suggestion, s) {
			t.Errorf("suggestion lacks %q: %s", s, e.Suggestion)
		}
	}
}

// setAuditor sets where write attempts are reported, for tests that build a registry first.
func (r *Registry) setAuditor(a Auditor) { r.auditor = a }

// setSessions gives the registry its session store, for tests that build a registry first.
func (r *Registry) setSessions(s SessionStore) { r.sessions = s }

// setTxLimiter sets the bound on pg_transaction connections, for tests that build a registry
// first.
func (r *Registry) setTxLimiter(l *TxLimiter) { r.txLimit = l }
