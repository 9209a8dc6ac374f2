package invoke

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/pgtools/pgtools/tools"
)

// Limiter enforces Limits per principal: a token bucket for the rate and a counter of calls in
// flight. Its map of configured tokens is built once and only read afterwards; principals it does
// not know — a JWT's subject ("jwt:<sub>"), an end user a token acts for ("<token>:<subject>") —
// get buckets of their own on first use, in dyn, except that the end users of one act_as token
// share that token's bucket, so spreading calls over subjects does not lift its limit. Calls in
// flight are counted per quota owner (tools.Principal.QuotaOwner: the token, or the JWT issuer,
// with all its subjects) against MaxConcurrentPerToken, and per subject against its subject share. It is
// safe for concurrent use.
type Limiter struct {
	limits  Limits
	metrics *Metrics
	per     map[string]*principalLimit
	dyn     sync.Map // principal name → *principalLimit, for principals not configured as tokens
	// fleet, when set, is the number of live replicas: each takes 1/fleet of the rate and the
	// burst, so a token's rate holds for the fleet as a whole (SetFleet).
	fleet *atomic.Int64
}

// principalLimit is one principal's bucket and in-flight count.
type principalLimit struct {
	bucket   *rate.Limiter // nil: no rate limit
	inflight atomic.Int64
	share    atomic.Int64 // the live replicas bucket is scaled for (1 when made)
}

// newLimiter returns nil when limits limit nothing, so the hot path skips it entirely.
func NewLimiter(limits Limits, principals []string, m *Metrics) *Limiter {
	if limits.RatePerSecond <= 0 && limits.MaxConcurrentPerToken <= 0 {
		return nil
	}
	l := &Limiter{limits: limits, metrics: m, per: map[string]*principalLimit{}}
	for _, p := range principals {
		l.per[p] = l.newPrincipalLimit()
	}
	return l
}

func (l *Limiter) newPrincipalLimit() *principalLimit {
	pl := &principalLimit{}
	if l.limits.RatePerSecond > 0 {
		burst := l.limits.Burst
		if burst <= 0 {
			burst = max(1, int(math.Ceil(l.limits.RatePerSecond)))
		}
		pl.bucket = rate.NewLimiter(rate.Limit(l.limits.RatePerSecond), burst)
	}
	pl.share.Store(1)
	return pl
}

// SetFleet makes the rate hold for a fleet whose live replicas live counts: each replica's
// bucket refills at RatePerSecond/live with a burst of Burst/live (rounded up, at least 1),
// rescaled at a principal's next call after the count changes. Callers spread evenly over the
// replicas (a round-robin proxy) then get RatePerSecond in all; calls concentrated on one
// replica get only its part. nil (the default) is one replica.
func (l *Limiter) SetFleet(live *atomic.Int64) {
	if l != nil {
		l.fleet = live
	}
}

// burst is the configured bucket size with its default.
func (l *Limiter) burst() int {
	if l.limits.Burst > 0 {
		return l.limits.Burst
	}
	return max(1, int(math.Ceil(l.limits.RatePerSecond)))
}

// replicas is the live replicas the limits are shared by, at least 1.
func (l *Limiter) replicas() int64 {
	if l.fleet == nil {
		return 1
	}
	return max(1, l.fleet.Load())
}

// rescale scales pl's bucket to the current fleet, once per change.
func (l *Limiter) rescale(pl *principalLimit) {
	n := l.replicas()
	old := pl.share.Load()
	if old == n || !pl.share.CompareAndSwap(old, n) {
		return
	}
	burst := l.burst()
	pl.bucket.SetLimit(rate.Limit(l.limits.RatePerSecond / float64(n)))
	pl.bucket.SetBurst(max(1, int(math.Ceil(float64(burst)/float64(n)))))
}

// of returns p's rate limit: its token's (an act_as token's end users share it), or one made for
// it on first use.
func (l *Limiter) of(p tools.Principal) *principalLimit {
	if pl := l.per[p.QuotaOwner()]; pl != nil {
		return pl
	}
	return l.named(p.Name)
}

// named returns the limit kept under name: a configured token's, or one made on first use.
func (l *Limiter) named(name string) *principalLimit {
	if pl := l.per[name]; pl != nil {
		return pl
	}
	if pl, ok := l.dyn.Load(name); ok {
		return pl.(*principalLimit)
	}
	pl, _ := l.dyn.LoadOrStore(name, l.newPrincipalLimit())
	return pl.(*principalLimit)
}

// Admission is what an admitted call holds until Done: the in-flight counters it was counted in.
type Admission struct {
	owner, subject *principalLimit // nil: not counted
}

// Admit lets a call of p start, or refuses it with a rate_limited error and how long to wait
// before retrying. Call Done with the Admission when the call ends.
func (l *Limiter) Admit(p tools.Principal) (a Admission, retryAfter time.Duration, terr *tools.Error) {
	if l == nil {
		return Admission{}, 0, nil
	}
	// Concurrency first: a call refused for it must not spend a rate token.
	if terr := l.enter(p, &a); terr != nil {
		l.metrics.limited("concurrency")
		return Admission{}, time.Second, terr
	}
	pl := l.of(p)
	if pl.bucket != nil {
		l.rescale(pl)
	}
	if pl.bucket != nil && !pl.bucket.Allow() {
		l.Done(a)
		l.metrics.limited("rate")
		// The bucket refills at RatePerSecond: the wait for one whole token is the deficit over
		// the rate.
		deficit := 1 - pl.bucket.Tokens()
		wait := time.Duration(deficit / float64(pl.bucket.Limit()) * float64(time.Second))
		wait = max(wait, time.Millisecond)
		return Admission{}, wait, &tools.Error{Type: tools.ErrRateLimited,
			Message: fmt.Sprintf("Too many calls for this token: the limit is %s calls per second (bursts of %d)%s",
				strconv.FormatFloat(l.limits.RatePerSecond, 'f', -1, 64), l.burst(), l.fleetNote(pl)),
			Suggestion: fmt.Sprintf("Wait %s, then retry; fewer, larger calls (a wider where, a bigger limit) also help.", roundWait(wait))}
	}
	return a, 0, nil
}

// fleetNote says how the limit is shared when several replicas share it.
func (l *Limiter) fleetNote(pl *principalLimit) string {
	n := l.replicas()
	if n <= 1 {
		return ""
	}
	return fmt.Sprintf(" for all %d replicas together; this one admits %s per second (bursts of %d)", n,
		strconv.FormatFloat(float64(pl.bucket.Limit()), 'f', 2, 64), pl.bucket.Burst())
}

// enter counts a call of p in flight, in its subject's share first (a subject over it is the one
// to wait), then in its owner's, or says which is full. On success a holds the counters to leave.
func (l *Limiter) enter(p tools.Principal, a *Admission) *tools.Error {
	limit := int64(l.limits.MaxConcurrentPerToken)
	if limit <= 0 {
		return nil
	}
	owner := p.QuotaOwner()
	if p.IsSubject() {
		sub := l.named(p.Name)
		if most := int64(l.limits.SubjectShare()); sub.inflight.Add(1) > most {
			sub.inflight.Add(-1)
			return &tools.Error{Type: tools.ErrRateLimited,
				Message: fmt.Sprintf("Too many calls in flight for you: at most %d at once for one user of %q (limits.max_concurrent_per_subject)", most, owner),
				Suggestion: "Wait for one of your running calls to finish, then retry; run calls one after another rather than in parallel. " +
					"If you need more at once, ask the operator to raise limits.max_concurrent_per_subject."}
		}
		a.subject = sub
	}
	own := l.named(owner)
	if own.inflight.Add(1) > limit {
		own.inflight.Add(-1)
		l.Done(*a)
		*a = Admission{}
		if p.IsSubject() {
			return &tools.Error{Type: tools.ErrRateLimited,
				Message:    fmt.Sprintf("Too many calls in flight for %q, shared by every user it acts for: at most %d at once (limits.max_concurrent_per_token)", owner, limit),
				Suggestion: fmt.Sprintf("Retry once calls of other users of %q finish. If this keeps happening, ask the operator to raise limits.max_concurrent_per_token.", owner)}
		}
		return &tools.Error{Type: tools.ErrRateLimited,
			Message:    fmt.Sprintf("Too many calls in flight for this token: at most %d at once (limits.max_concurrent_per_token)", limit),
			Suggestion: "Wait for one of your running calls to finish, then retry; run calls one after another rather than in parallel."}
	}
	a.owner = own
	return nil
}

// Done ends a call admitted with a.
func (l *Limiter) Done(a Admission) {
	if a.owner != nil {
		a.owner.inflight.Add(-1)
	}
	if a.subject != nil {
		a.subject.inflight.Add(-1)
	}
}

// retryAfterSeconds renders a wait as the Retry-After header wants it: whole seconds, at least 1.
func RetryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(max(1, int64(math.Ceil(d.Seconds()))), 10)
}

func roundWait(d time.Duration) time.Duration {
	switch {
	case d < 10*time.Millisecond:
		return 10 * time.Millisecond
	case d < time.Second:
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}

// SubjectShare is MaxConcurrentPerSubject with its default.
func (l Limits) SubjectShare() int {
	if l.MaxConcurrentPerSubject > 0 {
		return l.MaxConcurrentPerSubject
	}
	return max(1, l.MaxConcurrentPerToken/2)
}

// Limits are per-principal limits on tool calls, over HTTP and MCP alike. Zero means no limit.
type Limits struct {
	// RatePerSecond is the sustained rate of tool calls per token, refilling a token bucket
	// (default 0: unlimited).
	RatePerSecond float64 `json:"rate_per_second"`
	// Burst is the bucket size: calls allowed at once above the rate (default: RatePerSecond
	// rounded up, at least 1).
	Burst int `json:"burst"`
	// MaxConcurrentPerToken is the most calls one token may have in flight (default 0: unlimited); the
	// end users of an act_as token and the subjects of a JWT issuer count against their token's
	// or issuer's limit together.
	MaxConcurrentPerToken int `json:"max_concurrent_per_token"`
	// MaxConcurrentPerSubject is the most calls one end user (an act_as subject or a JWT's sub)
	// may have in flight within its token's or issuer's MaxConcurrentPerToken (default: half of it, at
	// least 1; unlimited when MaxConcurrentPerToken is).
	MaxConcurrentPerSubject int `json:"max_concurrent_per_subject"`
}
