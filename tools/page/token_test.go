package page

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pgtools/pgtools/tools/internal/pgerr"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

// TestSignerRoundTrip: a token opens, for the caller and tool it was issued to, to the state it
// was issued with; numbers come back as json.Number, as a call's arguments are decoded.
func TestSignerRoundTrip(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	s, err := NewSigner(Tokens{Key: testKey, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	k := "a'b"
	tok := s.Issue("alice", &State{Tool: "select_query", Args: map[string]any{"t": "orders", "l": json.Number("5")}, After: []*string{&k, nil}})
	st, e := s.Open("alice", "select_query", tok)
	if e != nil {
		t.Fatal(e)
	}
	if st.Tool != "select_query" || st.Args["t"] != "orders" || st.Args["l"] != json.Number("5") ||
		len(st.After) != 2 || *st.After[0] != k || st.After[1] != nil || st.Expires != now.Add(TTLDefault).Unix() {
		t.Fatalf("opened %+v", st)
	}
}

// TestSignerRefusals: a token changed in any byte, sent to another tool, by another caller,
// after its expiry, signed with another key or too long to be one is refused as
// invalid_arguments, saying which, without echoing the token.
func TestSignerRefusals(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	s, err := NewSigner(Tokens{Key: testKey, TTL: 90 * time.Second, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewSigner(Tokens{Key: []byte("another key, also 32 bytes long!"), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	tok := s.Issue("alice", &State{Tool: "t", Args: map[string]any{"w": "x > 1"}, Offset: 10})
	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	flipped := func(i int) string {
		b := append([]byte(nil), raw...)
		b[i] ^= 0x20
		return base64.RawURLEncoding.EncodeToString(b)
	}
	for _, c := range []struct {
		name, who, tool, token string
		s                      *Signer
		later                  time.Duration
		inMessage              string
	}{
		{"tampered version", "alice", "t", flipped(0), s, 0, "not a token"},
		{"tampered payload", "alice", "t", flipped(len(raw) / 2), s, 0, "was changed"},
		{"tampered signature", "alice", "t", flipped(len(raw) - 1), s, 0, "was changed"},
		{"not base64", "alice", "t", "%%%", s, 0, "not a token"},
		{"too long", "alice", "t", strings.Repeat("A", tokenMaxLen+1), s, 0, "not a token"},
		{"another tool", "alice", "u", tok, s, 0, "another tool"},
		{"another caller", "bob", "t", tok, s, 0, "another caller"},
		{"another key", "alice", "t", tok, other, 0, "another page token key"},
		{"expired", "alice", "t", tok, s, 91 * time.Second, "expired (tokens last 1m30s)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			signer := *c.s
			signer.now = func() time.Time { return now.Add(c.later) }
			st, e := signer.Open(c.who, c.tool, c.token)
			if e == nil {
				t.Fatalf("accepted: %+v", st)
			}
			if e.Type != pgerr.ErrInvalidArguments || !strings.Contains(e.Message, c.inMessage) || !strings.Contains(e.Suggestion, "without page_token") {
				t.Fatalf("got %q (%s), suggestion %q; want invalid_arguments naming %q", e.Message, e.Type, e.Suggestion, c.inMessage)
			}
			if strings.Contains(e.Message+e.Suggestion, tok[:20]) {
				t.Fatalf("the refusal repeats the token: %q", e.Message+e.Suggestion)
			}
		})
	}
	if _, e := s.Open("alice", "t", tok); e != nil {
		t.Fatalf("the token itself: %v", e)
	}
}

// TestNewSigner: a short key is refused; none makes a random one, so that two signers without a
// key refuse each other's tokens.
func TestNewSigner(t *testing.T) {
	t.Parallel()
	if _, err := NewSigner(Tokens{Key: testKey[:KeyMinBytes-1]}); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Fatalf("a short key: %v", err)
	}
	a, err := NewSigner(Tokens{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewSigner(Tokens{})
	if err != nil {
		t.Fatal(err)
	}
	if a.ttl != TTLDefault {
		t.Fatalf("ttl %s", a.ttl)
	}
	if _, e := b.Open("alice", "t", a.Issue("alice", &State{Tool: "t"})); e == nil {
		t.Fatal("two random keys accepted each other's token")
	}
}
