package runner

import (
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/pgtools/pgtools/tools"
)

// limiter enforces Limits per principal: a token bucket for the rate and a counter of calls in
// flight. Its map is built once from the configured tokens and only read afterwards, so admit
// takes no lock of its own; a principal it does not know (none is expected) is not limited. It
// is safe for concurrent use.
type limiter struct {
	limits  Limits
	metrics *Metrics
	per     map[string]*principalLimit
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
		pl := &principalLimit{}
		if limits.RatePerSecond > 0 {
			burst := limits.Burst
			if burst <= 0 {
				burst = max(1, int(math.Ceil(limits.RatePerSecond)))
			}
			pl.bucket = rate.NewLimiter(rate.Limit(limits.RatePerSecond), burst)
		}
		l.per[p] = pl
	}
	return l
}

// admit lets a call of p start, or refuses it with a rate_limited error and how long to wait
// before retrying. A nil pl with a nil error means "not limited"; otherwise call done(pl) when the
// call ends.
func (l *limiter) admit(p tools.Principal) (pl *principalLimit, retryAfter time.Duration, terr *tools.Error) {
	if l == nil {
		return nil, 0, nil
	}
	pl = l.per[p.Name]
	if pl == nil {
		return nil, 0, nil
	}
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
