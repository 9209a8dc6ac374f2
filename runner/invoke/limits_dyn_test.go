package invoke_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/invoke"
	"github.com/pgtools/pgtools/tools"
)

// TestLimitsReachPrincipalsNotConfiguredAsTokens: a JWT's subjects get a rate limit each, and the
// end users of an act_as token share the token's, so neither escapes the limits (before, a
// principal the limiter did not know at start was not limited at all).
func TestLimitsReachPrincipalsNotConfiguredAsTokens(t *testing.T) {
	t.Parallel()
	l := invoke.NewLimiter(invoke.Limits{RatePerSecond: 0.001, Burst: 1}, []string{"hub"}, nil)
	admit := func(name string) bool {
		// As ActAs.Principal and the JWT verifier build them: a subject names its owner.
		quota, _, _ := strings.Cut(name, ":")
		pl, _, terr := l.Admit(tools.Principal{Name: name, Quota: quota})
		if terr == nil {
			l.Done(pl)
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
	cfg := &config.Config{Tokens: []auth.Token{{Name: "hub", ActAs: true}}}
	if l := cfg.ConnLimits(); l.MaxSessionsPerSubject >= l.MaxSessions || l.MaxTransactionsPerSubject >= l.MaxTransactions {
		t.Fatalf("an act_as token's end user may take every slot: %+v", l)
	}
}

// TestConcurrencyPerOwnerAndSubject: calls in flight count against the token (or the JWT
// issuer) with all its subjects, and each subject against its share within it (default half,
// at least 1). Before, a JWT's subjects each had a limit of their own and an act_as token's
// subjects none of their own, so one end user could hold the token's whole limit.
func TestConcurrencyPerOwnerAndSubject(t *testing.T) {
	t.Parallel()
	l := invoke.NewLimiter(invoke.Limits{MaxConcurrentPerToken: 2}, []string{"hub", "other"}, nil)
	var held []invoke.Admission
	admit := func(name, quota string) *tools.Error {
		a, _, terr := l.Admit(tools.Principal{Name: name, Quota: quota})
		if terr == nil {
			held = append(held, a)
		}
		return terr
	}
	for _, owner := range []string{"hub", "jwt"} {
		if e := admit(owner+":a", owner); e != nil {
			t.Fatalf("%s's first subject: %v", owner, e)
		}
		e := admit(owner+":a", owner)
		if e == nil || !strings.Contains(e.Message, "at most 1 at once for one user of "+strconv.Quote(owner)) ||
			!strings.Contains(e.Suggestion, "limits.max_concurrent_per_subject") {
			t.Fatalf("%s's subject over its share: %+v", owner, e)
		}
		if e := admit(owner+":b", owner); e != nil {
			t.Fatalf("%s's second subject: %v", owner, e)
		}
		e = admit(owner+":c", owner)
		if e == nil || !strings.Contains(e.Message, strconv.Quote(owner)+", shared by every user it acts for: at most 2") {
			t.Fatalf("%s's third subject, over the owner's limit: %+v", owner, e)
		}
	}
	if e := admit("other", ""); e != nil {
		t.Fatalf("another token, while both owners are full: %v", e)
	}
	for _, a := range held {
		l.Done(a)
	}
	held = nil
	for _, name := range []string{"hub:c", "hub:d", "jwt:c", "jwt:d", "other", "other"} {
		quota, _, _ := strings.Cut(name, ":")
		if e := admit(name, quota); e != nil {
			t.Fatalf("%s after every call ended: %v", name, e)
		}
	}
}
