package forward

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The headers of a signed request between replicas, and of its signed answer.
const (
	headerTime      = "X-PgTools-Fleet-Time"      // the sender's clock, Unix milliseconds
	headerNonce     = "X-PgTools-Fleet-Nonce"     // 32 random hex digits, used once
	headerTarget    = "X-PgTools-Fleet-Target"    // the tag of the replica meant to run it; "*" to ask any replica its tag
	headerSender    = "X-PgTools-Fleet-Sender"    // the sender's tag, for the owner's log
	headerSignature = "X-PgTools-Fleet-Signature" // HMAC-SHA256, hex
)

// SecretMinBytes is the shortest fleet secret accepted (32 bytes: openssl rand -hex 32 gives 64).
const SecretMinBytes = 32

// Validity is how far a signed request's time may be from the receiver's clock; a nonce is
// remembered for twice as long, so a request is never accepted twice.
const Validity = 30 * time.Second

// maxNonces bounds the nonces remembered: past it, requests are refused (fail closed) until
// old ones expire. At 2×Validity it allows about 1,600 forwarded calls per second per replica.
const maxNonces = 200_000

// Errors of Verify. They are written to the sender's log, never to a tool caller.
var (
	ErrUnsigned    = errors.New("the request is not signed")
	ErrForged      = errors.New("the signature does not match (another secret, or a changed request)")
	ErrStale       = errors.New("the request's time is outside the validity window")
	ErrReplayed    = errors.New("the request's nonce was already used")
	ErrMisdirected = errors.New("the request is meant for another replica")
	ErrBusy        = errors.New("too many requests within the validity window")
)

// Signer signs requests between the replicas of one fleet, and checks them, with their shared
// secret. It is safe for concurrent use.
type Signer struct {
	secret []byte
	now    func() time.Time
	mu     sync.Mutex
	nonces map[string]time.Time // nonce → when it may be forgotten
	sweep  time.Time
}

// NewSigner returns a Signer over secret (at least SecretMinBytes long; the caller checks).
// now is the clock (nil: time.Now).
func NewSigner(secret []byte, now func() time.Time) *Signer {
	if now == nil {
		now = time.Now
	}
	return &Signer{secret: append([]byte(nil), secret...), now: now, nonces: map[string]time.Time{}}
}

// mac is the HMAC of the parts, each ended by a newline so that no two lists of parts give the
// same text.
func (s *Signer) mac(parts ...string) []byte {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte("pgtools-fleet-v1\n"))
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{'\n'})
	}
	return m.Sum(nil)
}

func digest(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// Sign signs r, whose body is body, for the replica whose tag is target ("*": any), from
// sender. It returns the nonce, which the answer's signature covers.
func (s *Signer) Sign(r *http.Request, body []byte, target, sender string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	nonce := hex.EncodeToString(b[:])
	ts := strconv.FormatInt(s.now().UnixMilli(), 10)
	r.Header.Set(headerTime, ts)
	r.Header.Set(headerNonce, nonce)
	r.Header.Set(headerTarget, target)
	r.Header.Set(headerSender, sender)
	r.Header.Set(headerSignature, hex.EncodeToString(s.mac("req", r.Method, r.URL.Path, digest(body), ts, target, sender, nonce)))
	return nonce
}

// Verify checks r, whose body is body, as a request for the replica whose tag is own: signed
// with the fleet's secret over its method, path, body, time, target, sender and nonce; within
// Validity of this clock; its nonce never seen before; and meant for own (or "*" where anyAllowed).
// It returns the nonce to sign the answer with (also with ErrMisdirected).
func (s *Signer) Verify(r *http.Request, body []byte, own string, anyAllowed bool) (string, error) {
	sig, ts, nonce := r.Header.Get(headerSignature), r.Header.Get(headerTime), r.Header.Get(headerNonce)
	target, sender := r.Header.Get(headerTarget), r.Header.Get(headerSender)
	if sig == "" || ts == "" || len(nonce) != 32 {
		return "", ErrUnsigned
	}
	got, err := hex.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac("req", r.Method, r.URL.Path, digest(body), ts, target, sender, nonce)) {
		return "", ErrForged
	}
	ms, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", ErrForged
	}
	now := s.now()
	if d := now.Sub(time.UnixMilli(ms)); d > Validity || d < -Validity {
		return "", ErrStale
	}
	if !(target == own || anyAllowed && target == "*") {
		// Signed by the fleet, for another replica: the answer is signed, so the sender can
		// trust that the address now serves someone else.
		return nonce, ErrMisdirected
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.After(s.sweep) {
		for n, until := range s.nonces {
			if now.After(until) {
				delete(s.nonces, n)
			}
		}
		s.sweep = now.Add(Validity / 4)
	}
	if until, seen := s.nonces[nonce]; seen && !now.After(until) {
		return "", ErrReplayed
	}
	if len(s.nonces) >= maxNonces {
		return "", ErrBusy
	}
	s.nonces[nonce] = now.Add(2 * Validity)
	return nonce, nil
}

// SignAnswer signs the answer body to the request whose nonce is nonce.
func (s *Signer) SignAnswer(h http.Header, nonce string, status int, body []byte) {
	h.Set(headerSignature, hex.EncodeToString(s.mac("answer", nonce, strconv.Itoa(status), digest(body))))
}

// VerifyAnswer checks an answer's signature: it came from a replica holding the secret, for
// the request whose nonce is nonce.
func (s *Signer) VerifyAnswer(h http.Header, nonce string, status int, body []byte) error {
	got, err := hex.DecodeString(strings.TrimSpace(h.Get(headerSignature)))
	if err != nil || len(got) == 0 {
		return ErrUnsigned
	}
	if !hmac.Equal(got, s.mac("answer", nonce, strconv.Itoa(status), digest(body))) {
		return ErrForged
	}
	return nil
}
