package runner

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/pgtools/pgtools/tools"
)

// limiter enforces Limits per principal: a token bucket for the rate and a counter of calls in
// flight. Its map of configured tokens is built once and only read afterwards; principals it does
// not know — a JWT's subject ("jwt:<sub>"), an end user a token acts for ("<token>:<subject>") —
// get buckets of their own on first use, in dyn, except that the end users of one act_as token
// share that token's bucket, so spreading calls over subjects does not lift its limit. It is safe
// for concurrent use.
type limiter struct {
	limits  Limits
	metrics *Metrics
	per     map[string]*principalLimit
	dyn     sync.Map // principal name → *principalLimit, for principals not configured as tokens
}

// principalLimit is one principal's bucket and in-flight count.
type principalLimit struct {
	bucket   *rate.Limiter // nil: no rate limit
	inflight atomic.Int64
}

// newLimiter returns nil when limits limit nothing, so the hot path skips it entirely.
func newLimiter(limits Limits, principals []string, m *Metrics) *limiter {
	if limits.RatePerSecond <= 0 && limits.MaxConcurrent <= 0 {
		return nil
	}
	l := &limiter{limits: limits, metrics: m, per: map[string]*principalLimit{}}
	for _, p := range principals {
		l.per[p] = l.newPrincipalLimit()
	}
	return l
}

func (l *limiter) newPrincipalLimit() *principalLimit {
	pl := &principalLimit{}
	if l.limits.RatePerSecond > 0 {
		burst := l.limits.Burst
		if burst <= 0 {
			burst = max(1, int(math.Ceil(l.limits.RatePerSecond)))
		}
		pl.bucket = rate.NewLimiter(rate.Limit(l.limits.RatePerSecond), burst)
	}
	return pl
}

// of returns p's limit: its token's, or one made for it on first use.
func (l *limiter) of(p tools.Principal) *principalLimit {
	if pl := l.per[p.Name]; pl != nil {
		return pl
	}
	if token, _, ok := strings.Cut(p.Name, ":"); ok {
		if pl := l.per[token]; pl != nil {
			return pl // an end user of an act_as token
		}
	}
	if pl, ok := l.dyn.Load(p.Name); ok {
		return pl.(*principalLimit)
	}
	pl, _ := l.dyn.LoadOrStore(p.Name, l.newPrincipalLimit())
	return pl.(*principalLimit)
}

// admit lets a call of p start, or refuses it with a rate_limited error and how long to wait
// before retrying. A nil pl with a nil error means "not limited"; otherwise call done(pl) when the
// call ends.
func (l *limiter) admit(p tools.Principal) (pl *principalLimit, retryAfter time.Duration, terr *tools.Error) {
	if l == nil {
		return nil, 0, nil
	}
	pl = l.of(p)
	// Concurrency first: a call refused for it must not spend a rate token.
	if max := int64(l.limits.MaxConcurrent); max > 0 {
		if pl.inflight.Add(1) > max {
			pl.inflight.Add(-1)
			l.metrics.limited("concurrency")
			return nil, time.Second, &tools.Error{Type: tools.ErrRateLimited,
				Message:    fmt.Sprintf("Too many calls in flight for this token: at most %d at once", max),
				Suggestion: "Wait for one of your running calls to finish, then retry; run calls one after another rather than in parallel."}
		}
	}
	if pl.bucket != nil && !pl.bucket.Allow() {
		if l.limits.MaxConcurrent > 0 {
			pl.inflight.Add(-1)
		}
		l.metrics.limited("rate")
		// The bucket refills at RatePerSecond: the wait for one whole token is the deficit over
		// the rate.
		deficit := 1 - pl.bucket.Tokens()
		wait := time.Duration(deficit / l.limits.RatePerSecond * float64(time.Second))
		wait = max(wait, time.Millisecond)
		return nil, wait, &tools.Error{Type: tools.ErrRateLimited,
			Message: fmt.Sprintf("Too many calls for this token: the limit is %s calls per second (bursts of %d)",
				strconv.FormatFloat(l.limits.RatePerSecond, 'f', -1, 64), pl.bucket.Burst()),
			Suggestion: fmt.Sprintf("Wait %s, then retry; fewer, larger calls (a wider where, a bigger limit) also help.", roundWait(wait))}
	}
	return pl, 0, nil
}

// done ends a call admitted with pl.
func (l *limiter) done(pl *principalLimit) {
	if pl != nil && l.limits.MaxConcurrent > 0 {
		pl.inflight.Add(-1)
	}
}

// retryAfterSeconds renders a wait as the Retry-After header wants it: whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) string {
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
