package tools

import (
	"context"
	"sync"
	"time"
)

// TxLimiter bounds the connections pg_transaction opens. Each call opens a fresh connection
// outside the stateless pools (DESIGN §3), so without a bound one caller sending many calls at
// once opens as many backends as it likes. The limiter caps them in total and per principal:
// a principal over its own share is refused at once (rate_limited), which leaves the rest of the
// total for the others; a call within its share waits for a free connection up to the database's
// pool_wait when the total is in use, and is then refused too. It is safe for concurrent use; a
// nil *TxLimiter admits everything.
type TxLimiter struct {
	total        int
	perPrincipal int
	slots        chan struct{} // one element per pg_transaction connection open or opening

	mu  sync.Mutex
	per map[string]int // admitted calls per principal name, waiting ones included
}

// NewTxLimiter returns a limiter of total connections at once (default 10 when total <= 0), of
// which one principal may hold perPrincipal (default, and at most, total).
func NewTxLimiter(total, perPrincipal int) *TxLimiter {
	if total <= 0 {
		total = 10
	}
	if perPrincipal <= 0 || perPrincipal > total {
		perPrincipal = total
	}
	return &TxLimiter{total: total, perPrincipal: perPrincipal, slots: make(chan struct{}, total), per: map[string]int{}}
}

// SetTxLimiter gives the registry the bound on pg_transaction connections (nil: no bound). Call
// it before serving.
func (r *Registry) SetTxLimiter(l *TxLimiter) { r.txLimit = l }

// acquire admits one pg_transaction call of p on db, or says why not. The caller runs release
// once the call's connection is closed. A wait for a free connection is bounded by db's
// PoolWait and reported as such, apart from any statement timeout: no statement has started.
func (l *TxLimiter) acquire(ctx context.Context, p Principal, db *Database) (release func(), e *Error) {
	if l == nil {
		return func() {}, nil
	}
	l.mu.Lock()
	n := l.per[p.Name]
	if n >= l.perPrincipal {
		l.mu.Unlock()
		return nil, errorf(ErrRateLimited,
			"Wait for one of them to finish, then retry. Put statements that belong together into the operations of one call, or run them in a session (pg_tx begin).",
			"You already have %d pg_transaction call(s) running, the most one caller may have at once (this runner has %d slots in all); none of your operations ran", n, l.total)
	}
	l.per[p.Name] = n + 1
	l.mu.Unlock()
	leave := func() {
		l.mu.Lock()
		if l.per[p.Name]--; l.per[p.Name] <= 0 {
			delete(l.per, p.Name)
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
				"Retry in a few seconds, or run the statements in a session (pg_tx begin, then the tools with session_id). If this keeps happening, ask the operator to raise max_transactions.",
				"All %d pg_transaction slots of this runner stayed busy for %s, the longest a call waits; none of your operations ran", l.total, wait)
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
