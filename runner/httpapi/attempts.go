package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/invoke"
	"github.com/pgtools/pgtools/tools"
)

// Defaults of the limits on guessing credentials and on the approvals API.
const (
	// DefaultAuthFailuresPerSecond is how many failed authentications (a bearer token or an
	// /approvals sign-in the runner does not accept) one client address, and one credential
	// tried, may have in a second; the next attempt is answered 429 until the second is over.
	DefaultAuthFailuresPerSecond = config.DefaultAuthFailuresPerSecond
	// DefaultApproverCallsPerSecond is how many calls of the approvals API one approver's
	// credential may make in a second.
	DefaultApproverCallsPerSecond = config.DefaultApproverCallsPerSecond
	// attemptKeysMax bounds the keys an attemptLimiter remembers: at ~100 bytes a key, 6.4 MiB.
	attemptKeysMax = 65536
)

// attemptLimiter counts events per key in windows of one second, starting at a key's first
// event: a key with limit events in its window is refused until the window ends. It remembers
// at most attemptKeysMax keys: a full table forgets the ended windows first, then arbitrary
// keys (a flood of fresh addresses can then reset some counts; it cannot grow memory). Safe
// for concurrent use.
type attemptLimiter struct {
	limit  int
	window time.Duration
	now    func() time.Time

	mu   sync.Mutex
	keys map[string]*attemptWindow
}

type attemptWindow struct {
	start time.Time
	n     int
}

func newAttemptLimiter(limit int, now func() time.Time) *attemptLimiter {
	if now == nil {
		now = time.Now
	}
	return &attemptLimiter{limit: limit, window: time.Second, now: now, keys: map[string]*attemptWindow{}}
}

// blocked reports whether any of keys has used its window's events up, and how long until
// that window ends.
func (l *attemptLimiter) blocked(keys ...string) (time.Duration, bool) {
	if l == nil || l.limit <= 0 {
		return 0, false
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	var wait time.Duration
	for _, k := range keys {
		if w, ok := l.keys[k]; ok && now.Sub(w.start) < l.window && w.n >= l.limit {
			wait = max(wait, w.start.Add(l.window).Sub(now))
		}
	}
	return wait, wait > 0
}

// add counts one event for each of keys.
func (l *attemptLimiter) add(keys ...string) {
	if l == nil || l.limit <= 0 {
		return
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		w, ok := l.keys[k]
		if !ok || now.Sub(w.start) >= l.window {
			if !ok && len(l.keys) >= attemptKeysMax {
				l.evict(now)
			}
			l.keys[k] = &attemptWindow{start: now, n: 1}
			continue
		}
		w.n++
	}
}

// evict makes room in a full table: ended windows go first, then whatever map order gives.
func (l *attemptLimiter) evict(now time.Time) {
	for k, w := range l.keys {
		if now.Sub(w.start) >= l.window {
			delete(l.keys, k)
		}
	}
	for k := range l.keys {
		if len(l.keys) < attemptKeysMax {
			return
		}
		delete(l.keys, k)
	}
}

// clientKey names r's client by its address (the connection's peer: pgtools trusts no
// forwarding header for this).
func clientKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "client " + host
}

// credentialKey names a secret that was tried by a digest of it: the secret itself is never
// kept, logged or compared.
func credentialKey(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return "credential " + hex.EncodeToString(h[:16])
}

// bearerOf is r's bearer token, "" for none.
func bearerOf(r *http.Request) string {
	v := r.Header.Get("Authorization")
	if len(v) > 7 && strings.EqualFold(v[:7], "Bearer ") {
		return strings.TrimSpace(v[7:])
	}
	return ""
}

// rateLimitedError is the 429 answer of a client or credential over a limit of attempts.
func rateLimitedError(what string, limit int, wait time.Duration) *tools.Error {
	return &tools.Error{Type: tools.ErrRateLimited,
		Message: fmt.Sprintf("Too many %s from this client or with this credential: at most %d a second", what, limit),
		Suggestion: fmt.Sprintf("Wait %s seconds (Retry-After) and try again with the right token; a token that was not accepted will not be accepted by trying again.",
			invoke.RetryAfterSeconds(wait))}
}

// writeRateLimited answers e with 429 and Retry-After.
func writeRateLimited(w http.ResponseWriter, r *http.Request, e *tools.Error, wait time.Duration) {
	w.Header().Set("Retry-After", invoke.RetryAfterSeconds(wait))
	writeAPIError(w, r, e)
}

// authKeys are the keys a request's authentication failures count against: its client and the
// credential it tried (when it tried one).
func authKeys(r *http.Request, secret string) []string {
	if secret == "" {
		return []string{clientKey(r)}
	}
	return []string{clientKey(r), credentialKey(secret)}
}
