// Package page makes the page tokens that continue a truncated read, and the keyset order they
// continue by. It knows nothing of the registry, the request or the principal: the caller names
// who a token is for with a string of its own (Signer.Issue) and which arguments a token fixes
// with a Spec.
//
// A page token (select_query's next_page) is what a truncated read hands the model so that the
// next call continues right after the last row it got. It is stateless, so that any replica
// sharing the key continues any token: it carries the arguments that fix which rows match
// (Spec.Bound), the last row's values of the order (Order.After) or, for a table without a
// usable key, the offset reached, an expiry and a keyed hash of the caller. It is signed
// (HMAC-SHA256, cut to 128 bits), not encrypted: the caller reads its own arguments and the key
// of the last row it was sent, nothing more. Wire form: base64url without padding of version
// byte, JSON payload, MAC.
//
// A Signer is safe for concurrent use once made; Spec and Order are plain values, safe for
// concurrent use as long as nobody changes them.
package page

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/pgtools/pgtools/tools/internal/pgerr"
	"github.com/pgtools/pgtools/tools/internal/wire"
)

// TTLDefault is how long a page token stays valid when Tokens.TTL is zero.
const TTLDefault = 15 * time.Minute

// KeyMinBytes is the shortest key Tokens accepts.
const KeyMinBytes = 32

// Tokens configures the page tokens of truncated reads. The zero value works for one process: a
// random key made by NewSigner, tokens valid for TTLDefault.
type Tokens struct {
	// Key signs the tokens; replicas that continue each other's tokens share it. At least
	// KeyMinBytes bytes; empty makes a random key per Signer, so tokens survive neither a
	// restart nor a trip to another replica.
	Key []byte
	// TTL is how long a token stays valid. Defaults to TTLDefault.
	TTL time.Duration
	// Now is the clock tokens are dated by. Defaults to time.Now.
	Now func() time.Time
}

const (
	tokenVersion = 1
	macBytes     = 16
	// tokenMaxLen bounds what is decoded at all: a real token is a few hundred bytes, its
	// arguments (where, params) being the long part.
	tokenMaxLen = 64 << 10
)

// Signer signs and opens page tokens; a registry makes one when it is built.
type Signer struct {
	key []byte
	ttl time.Duration
	now func() time.Time
}

// NewSigner makes the Signer o configures, refusing a key shorter than KeyMinBytes.
func NewSigner(o Tokens) (*Signer, error) {
	s := &Signer{key: o.Key, ttl: o.TTL, now: o.Now}
	switch {
	case len(s.key) == 0:
		s.key = make([]byte, KeyMinBytes)
		if _, err := rand.Read(s.key); err != nil {
			return nil, fmt.Errorf("making a page token key: %w", err)
		}
	case len(s.key) < KeyMinBytes:
		return nil, fmt.Errorf("page token key: %d bytes; use at least %d (openssl rand -hex 32)", len(s.key), KeyMinBytes)
	}
	if s.ttl <= 0 {
		s.ttl = TTLDefault
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// State is a token's content.
type State struct {
	Expires int64          `json:"e"`           // Unix seconds
	Who     string         `json:"w"`           // keyed hash of the caller
	Tool    string         `json:"-"`           // the tool it continues: signed, not sent
	Args    map[string]any `json:"a"`           // the bound arguments, normalized (Spec.Args)
	After   []*string      `json:"k,omitempty"` // the last row's order values, text format; nil: NULL
	Offset  int64          `json:"o,omitempty"` // rows already read, where the table has no usable key
}

// whoHash names a caller in a token without revealing it: the same who gives the same hash.
func (s *Signer) whoHash(who string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("principal\x00" + who))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:9])
}

func (s *Signer) mac(tool string, payload []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("page\x00" + tool + "\x00"))
	m.Write(payload)
	return m.Sum(nil)[:macBytes]
}

// Issue makes the token that continues st (its Tool, Args and After or Offset) for the caller
// who names: any string that is the same for callers who may share tokens and differs for
// those who may not. It sets st's Expires and Who.
func (s *Signer) Issue(who string, st *State) string {
	st.Expires = s.now().Add(s.ttl).Unix()
	st.Who = s.whoHash(who)
	payload, err := json.Marshal(st)
	if err != nil { // the state holds strings, numbers and lists only
		panic(fmt.Sprintf("page: encoding a page token: %v", err))
	}
	buf := make([]byte, 0, 1+len(payload)+macBytes)
	buf = append(buf, tokenVersion)
	buf = append(buf, payload...)
	buf = append(buf, s.mac(st.Tool, payload)...)
	return base64.RawURLEncoding.EncodeToString(buf)
}

// TokenError is the refusal of a page token the caller cannot use (invalid_arguments); fix says
// how to go on.
func TokenError(why, fix string) *pgerr.Error {
	return pgerr.Errorf(pgerr.ErrInvalidArguments, fix, "Invalid arguments: page_token %s", why)
}

// RestartFix is the suggestion of a refusal after which only a first page helps.
const RestartFix = "Call again without page_token (and without offset) to read from the first page; its answer's next_page continues from there."

// Open checks token for a call of tool by the caller who names (as for Issue) and returns its
// state. Refusals are TokenErrors that say which of tampered, expired or foreign it is, never
// echoing the token.
func (s *Signer) Open(who, tool, token string) (*State, *pgerr.Error) {
	if len(token) > tokenMaxLen {
		return nil, TokenError("is not a token this runner issued", "Send next_page exactly as an answer gave it. "+RestartFix)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(token))
	if err != nil || len(raw) < 1+macBytes+2 || raw[0] != tokenVersion {
		return nil, TokenError("is not a token this runner issued", "Send next_page exactly as an answer gave it. "+RestartFix)
	}
	payload, sum := raw[1:len(raw)-macBytes], raw[len(raw)-macBytes:]
	if !hmac.Equal(sum, s.mac(tool, payload)) {
		return nil, TokenError("was changed, was issued by another tool, or was made by a runner with another page token key",
			"Send next_page exactly as the answer gave it, to the tool that gave it; replicas continue each other's tokens only when they share page_tokens.key_file. "+RestartFix)
	}
	var st State
	if err := wire.Unmarshal(payload, &st); err != nil {
		return nil, TokenError("is not a token this runner issued", RestartFix)
	}
	st.Tool = tool
	if !hmac.Equal([]byte(st.Who), []byte(s.whoHash(who))) {
		return nil, TokenError("was issued to another caller", "A page token works only for the caller it was issued to. "+RestartFix)
	}
	if s.now().Unix() > st.Expires {
		return nil, TokenError(fmt.Sprintf("expired (tokens last %s)", formatTTL(s.ttl)), RestartFix)
	}
	return &st, nil
}

func formatTTL(d time.Duration) string {
	if d%time.Minute == 0 {
		return fmt.Sprintf("%d minutes", int(d/time.Minute))
	}
	return d.String()
}
