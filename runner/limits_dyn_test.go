package runner

import (
	"testing"

	"github.com/pgtools/pgtools/tools"
)

// TestLimitsReachPrincipalsNotConfiguredAsTokens: a JWT's subjects get a rate limit each, and the
// end users of an act_as token share the token's, so neither escapes the limits (before, a
// principal the limiter did not know at start was not limited at all).
func TestLimitsReachPrincipalsNotConfiguredAsTokens(t *testing.T) {
	t.Parallel()
	l := newLimiter(Limits{RatePerSecond: 0.001, Burst: 1}, []string{"hub"}, nil)
	admit := func(name string) bool {
		pl, _, terr := l.admit(tools.Principal{Name: name})
		if terr == nil {
			l.done(pl)
		}
		return terr == nil
	}
	if !admit("hub:alice") || admit("hub:bob") || admit("hub") {
		t.Fatal("the end users of an act_as token do not share its limit")
	}
	if !admit("jwt:x") || admit("jwt:x") {
		t.Fatal("a JWT subject is not limited")
	}
	if !admit("jwt:y") {
		t.Fatal("one JWT subject's calls limited another's")
	}
	// An act_as token's end users share its session and transaction shares (tools.Principal.Quota),
	// each within a subject share, so no one of them gets every slot even when the token does.
	cfg := &Config{Tokens: []Token{{Name: "hub", ActAs: true}}}
	if l := cfg.ConnLimits(); l.MaxSessionsPerSubject >= l.MaxSessions || l.MaxTransactionsPerSubject >= l.MaxTransactions {
		t.Fatalf("an act_as token's end user may take every slot: %+v", l)
	}
}
