package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ConnLimits bound pg_tx sessions, each on a connection of its own outside the stateless pools,
// and pg_transaction calls, each holding a pooled connection for its batch. The per-principal
// shares keep one token (with every end user it acts for) or JWT issuer (with all its subjects)
// from taking every slot from the others; the per-subject shares keep one end user from taking
// its token's or issuer's whole share.
type ConnLimits struct {
	// MaxSessions caps open sessions (default 10).
	MaxSessions int
	// MaxSessionsPerPrincipal caps one token's (or JWT issuer's) open sessions, read-only ones
	// and those of every subject it acts for included.
	MaxSessionsPerPrincipal int
	// MaxTransactions caps pg_transaction calls running at once (default 10).
	MaxTransactions int
	// MaxTransactionsPerPrincipal caps one token's (or JWT issuer's) pg_transaction calls
	// running at once, its subjects' included.
	MaxTransactionsPerPrincipal int
	// MaxSessionsPerSubject caps one subject's open sessions within its token's or issuer's share.
	MaxSessionsPerSubject int
	// MaxTransactionsPerSubject caps one subject's pg_transaction calls running at once within
	// its token's or issuer's share.
	MaxTransactionsPerSubject int
}

// Principals counts the quota owners that can call the runner: one per API token (the local
// principal when there are none), the n8n broker principal when brokers are joined, and the JWT
// issuer. An act_as token and an issuer stand for any number of end users, but they share one
// owner's quota (tools.Principal.Quota), each user within a subject share of it, so they count
// once.
func (c *Config) Principals() int {
	n := max(1, len(c.Tokens))
	if c.N8N.Joins() {
		n++ // the broker principal shares the session and transaction limits
	}
	if c.JWT != nil {
		n++
	}
	return n
}

// ConnLimits returns the configured limits with their defaults (withDefaults: 10 sessions and
// 10 pg_transaction calls at once). A token's (or JWT issuer's) share is all of them when only
// one can exist (open loopback access or a single token, and no JWT issuer or n8n broker), else
// half, at least 1. A subject's share within it is half the owner's share, at least 1.
func (c *Config) ConnLimits() ConnLimits {
	d := c.withDefaults()
	l := ConnLimits{MaxSessions: d.Sessions.MaxSessions, MaxSessionsPerPrincipal: d.Sessions.MaxSessionsPerPrincipal,
		MaxTransactions: d.Sessions.MaxTransactions, MaxTransactionsPerPrincipal: d.Sessions.MaxTransactionsPerPrincipal,
		MaxSessionsPerSubject: d.Sessions.MaxSessionsPerSubject, MaxTransactionsPerSubject: d.Sessions.MaxTransactionsPerSubject}
	if l.MaxSessionsPerPrincipal <= 0 {
		l.MaxSessionsPerPrincipal = share(l.MaxSessions, c.Principals())
	}
	if l.MaxTransactionsPerPrincipal <= 0 {
		l.MaxTransactionsPerPrincipal = share(l.MaxTransactions, c.Principals())
	}
	if l.MaxSessionsPerSubject <= 0 {
		l.MaxSessionsPerSubject = share(l.MaxSessionsPerPrincipal, 2)
	}
	if l.MaxTransactionsPerSubject <= 0 {
		l.MaxTransactionsPerSubject = share(l.MaxTransactionsPerPrincipal, 2)
	}
	return l
}

func share(total, principals int) int {
	if principals <= 1 {
		return total
	}
	return max(1, total/2)
}

// SharedRoleNotes names every database entry that tokens with different scopes share. They then
// share its connection role, and PostgreSQL lets a role see the statement text of its own
// backends in pg_stat_activity and cancel or terminate them, so a read token can read a write
// token's SQL and kill its sessions. serve logs the notes as warnings, check-config prints them.
func (c *Config) SharedRoleNotes() []string {
	var notes []string
	for _, db := range slices.Sorted(maps.Keys(c.Databases)) {
		var users []string
		scopes := map[string]bool{}
		for _, t := range c.Tokens {
			if len(t.Databases) > 0 && !slices.Contains(t.Databases, db) || t.Role != "" {
				continue // a token with a role of its own (SET LOCAL ROLE) shares nothing
			}
			// approve runs no statement (it decides approval requests in the runner's memory), so
			// it neither shares a backend nor tells two tokens' roles apart.
			s := slices.DeleteFunc(slices.Clone(t.Scopes), func(s string) bool { return s == "approve" })
			if len(s) == 0 {
				continue
			}
			slices.Sort(s)
			list := strings.Join(s, ",")
			scopes[list] = true
			users = append(users, fmt.Sprintf("%q (%s)", t.Name, list))
		}
		if len(scopes) < 2 {
			continue
		}
		notes = append(notes, fmt.Sprintf("databases.%s: tokens with different scopes share it and so its database role: %s. "+
			"Each can read the others' statements (pg_stat_activity.query) and cancel or end their backends "+
			"(pg_cancel_backend, pg_terminate_backend). Give each token its own database entry whose url logs in as a role of its own, "+
			"and limit the token to it with databases (docs/security.md: Security model).", db, strings.Join(users, ", ")))
	}
	return notes
}
