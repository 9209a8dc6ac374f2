package tools

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// TxLimiter bounds the pooled connections pg_transaction calls hold at once. A batch keeps its
// connection for all its operations (docs/design.md §3), so without a bound one caller sending
// many batches at once takes the whole pool from the stateless calls of everyone else. The
// limiter caps them in total, per quota owner
// (Principal.QuotaOwner: a token with every end user it acts for, a JWT issuer with all its
// subjects) and per subject within its owner's share: a call over its subject's or owner's share
// is refused at once (rate_limited), which leaves the rest of the total for the others; a call
// within its shares waits for a free connection up to the database's pool_wait when the total
// is in use, and is then refused too. An owner whose share is the whole total (the only one
// configured) is never refused at once: its calls beyond the total wait like the others. It is
// safe for concurrent use; a nil *TxLimiter admits everything.
type TxLimiter struct {
	total        int
	perPrincipal int
	perSubject   int
	slots        chan struct{} // one element per pg_transaction connection open or opening

	mu   sync.Mutex
	base [2]int         // perPrincipal and perSubject as configured, before SetFleetShare
	per  map[string]int // admitted calls per quota owner, waiting ones included
	subj map[string]int // the same per subject principal (Principal.IsSubject)
}

// NewTxLimiter returns a limiter of total connections at once (default 10 when total <= 0), of
// which one quota owner may hold perPrincipal (default, and at most, total) and one subject of
// an owner perSubject (default, and at most, perPrincipal).
func NewTxLimiter(total, perPrincipal, perSubject int) *TxLimiter {
	if total <= 0 {
		total = 10
	}
	if perPrincipal <= 0 || perPrincipal > total {
		perPrincipal = total
	}
	if perSubject <= 0 || perSubject > perPrincipal {
		perSubject = perPrincipal
	}
	return &TxLimiter{total: total, perPrincipal: perPrincipal, perSubject: perSubject, slots: make(chan struct{}, total),
		base: [2]int{perPrincipal, perSubject}, per: map[string]int{}, subj: map[string]int{}}
}

// SetFleetShare makes a quota owner's and a subject's shares hold for a fleet of n live
// replicas together: each replica takes 1/n of the configured share, at least 1 (so with more
// replicas than the share, a token may hold up to n at once). n <= 1 restores the configured
// shares. Calls already admitted keep running.
func (l *TxLimiter) SetFleetShare(n int) {
	if l == nil {
		return
	}
	n = max(n, 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.perPrincipal, l.perSubject = max(1, l.base[0]/n), max(1, l.base[1]/n)
}

// acquire admits one pg_transaction call of p on db, or says why not. The caller runs release
// once the call's connection is back in the pool (or destroyed). A wait for a free slot is
// bounded by db's PoolWait and reported as such, apart from any statement timeout: no statement
// has started.
func (l *TxLimiter) acquire(ctx context.Context, p Principal, db *Database) (release func(), e *Error) {
	if l == nil {
		return func() {}, nil
	}
	owner, subject := p.QuotaOwner(), p.IsSubject()
	l.mu.Lock()
	if e := l.full(p, owner, subject); e != nil {
		l.mu.Unlock()
		return nil, e
	}
	l.per[owner]++
	if subject {
		l.subj[p.Name]++
	}
	l.mu.Unlock()
	leave := func() {
		l.mu.Lock()
		if l.per[owner]--; l.per[owner] <= 0 {
			delete(l.per, owner)
		}
		if subject {
			if l.subj[p.Name]--; l.subj[p.Name] <= 0 {
				delete(l.subj, p.Name)
			}
		}
		l.mu.Unlock()
	}
	select {
	case l.slots <- struct{}{}:
	default:
		wait := db.Policy.PoolWait
		if wait <= 0 {
			wait = 5 * time.Second
		}
		timer := time.NewTimer(wait)
		defer timer.Stop()
		select {
		case l.slots <- struct{}{}:
		case <-timer.C:
			leave()
			return nil, errorf(ErrRateLimited,
				"Retry in a few seconds, or run the statements in a session (pg_tx begin, then the tools with session_id). If this keeps happening, ask the operator to raise sessions.max_transactions.",
				"All %d pg_transaction slots of this runner stayed busy for %s, the longest a call waits (sessions.max_transactions); none of your operations ran", l.total, wait)
		case <-ctx.Done():
			leave()
			return nil, ClassifyError(ctx, ctx.Err(), db)
		}
	}
	return func() {
		<-l.slots
		leave()
	}, nil
}

// full says which of p's shares has no room for one more call, narrowest first, or nil. Caller
// holds mu.
func (l *TxLimiter) full(p Principal, owner string, subject bool) *Error {
	const wait = "Wait for one of them to finish, then retry. Put statements that belong together into the operations of one call, or run them in a session (pg_tx begin)."
	if n := l.subj[p.Name]; subject && n >= l.perSubject {
		return errorf(ErrRateLimited, wait+" If you need more at once, ask the operator to raise sessions.max_transactions_per_subject.",
			"You already have %d pg_transaction call(s) running, the most one user of %q may have at once (sessions.max_transactions_per_subject; %q has %d in all); none of your operations ran",
			n, owner, owner, l.perPrincipal)
	}
	n := l.per[owner]
	if n < l.perPrincipal || l.perPrincipal >= l.total && !subject {
		// A share of the whole runner (the only principal, or one configured so) leaves nothing
		// to keep free for others: its calls beyond the slots wait for one like everyone's.
		return nil
	}
	if subject {
		return errorf(ErrRateLimited,
			fmt.Sprintf("Retry once calls of other users of %q finish; put statements that belong together into the operations of one call. If this keeps happening, ask the operator to raise sessions.max_transactions_per_principal.", owner),
			"All %d pg_transaction calls %q may run at once, shared by every user it acts for, are running (sessions.max_transactions_per_principal); you have %d of them; none of your operations ran",
			l.perPrincipal, owner, l.subj[p.Name])
	}
	return errorf(ErrRateLimited, wait+" If you need more at once, ask the operator to raise sessions.max_transactions_per_principal.",
		"You already have %d pg_transaction call(s) running, the most one caller may have at once (sessions.max_transactions_per_principal; this runner has %d slots in all); none of your operations ran", n, l.total)
}
