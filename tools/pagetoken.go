package tools

import (
	"bytes"
	"cmp"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pgtools/pgtools/tools/discovery"
	"github.com/pgtools/pgtools/tools/internal/ident"
	"github.com/pgtools/pgtools/tools/internal/wire"
)

// A page token (select_query's next_page) is what a truncated read hands the model so that the
// next call continues right after the last row it got. It is stateless, so that any replica
// sharing the key continues any token: it carries the arguments that fix which rows match
// (pageBound), the last row's values of the order (keyset.go) or, for a table without a usable
// key, the offset reached, an expiry and a keyed hash of the principal. It is signed
// (HMAC-SHA256, cut to 128 bits), not encrypted: the caller reads its own arguments and the key
// of the last row it was sent, nothing more.
//
// Wire form: base64url without padding of version byte, JSON payload, MAC.

// PageTokensTTLDefault is how long a page token stays valid when PageTokens.TTL is zero.
const PageTokensTTLDefault = 15 * time.Minute

// PageTokenKeyMinBytes is the shortest key PageTokens accepts.
const PageTokenKeyMinBytes = 32

// PageTokens configures the page tokens of truncated reads. The zero value works for one
// process: a random key made when the registry is built, tokens valid for PageTokensTTLDefault.
type PageTokens struct {
	// Key signs the tokens; replicas that continue each other's tokens share it. At least
	// PageTokenKeyMinBytes bytes; empty makes a random key per registry, so tokens survive neither
	// a restart nor a trip to another replica.
	Key []byte
	// TTL is how long a token stays valid. Defaults to PageTokensTTLDefault.
	TTL time.Duration
	// Now is the clock tokens are dated by. Defaults to time.Now.
	Now func() time.Time
}

const (
	pageTokenVersion = 1
	pageMACBytes     = 16
	// pageTokenMaxLen bounds what is decoded at all: a real token is a few hundred bytes, its
	// arguments (where, params) being the long part.
	pageTokenMaxLen = 64 << 10
)

// pager signs and opens page tokens; built once per registry.
type pager struct {
	key []byte
	ttl time.Duration
	now func() time.Time
}

func newPager(o PageTokens) (*pager, error) {
	p := &pager{key: o.Key, ttl: o.TTL, now: o.Now}
	switch {
	case len(p.key) == 0:
		p.key = make([]byte, PageTokenKeyMinBytes)
		if _, err := rand.Read(p.key); err != nil {
			return nil, fmt.Errorf("making a page token key: %w", err)
		}
	case len(p.key) < PageTokenKeyMinBytes:
		return nil, fmt.Errorf("page token key: %d bytes; use at least %d (openssl rand -hex 32)", len(p.key), PageTokenKeyMinBytes)
	}
	if p.ttl <= 0 {
		p.ttl = PageTokensTTLDefault
	}
	if p.now == nil {
		p.now = time.Now
	}
	return p, nil
}

// pageState is a token's content.
type pageState struct {
	Expires int64          `json:"e"`           // Unix seconds
	Who     string         `json:"w"`           // keyed hash of the principal (whoHash)
	Tool    string         `json:"-"`           // the tool it continues: signed, not sent
	Args    map[string]any `json:"a"`           // the bound arguments, normalized (pageBound)
	After   []*string      `json:"k,omitempty"` // the last row's order values, text format; nil: NULL
	Offset  int64          `json:"o,omitempty"` // rows already read, where the table has no usable key
}

// whoHash names a principal in a token without revealing it: the same name, role and claims
// give the same hash, and claims matter because row-level security reads them.
func (pg *pager) whoHash(p Principal) string {
	m := hmac.New(sha256.New, pg.key)
	m.Write([]byte("principal\x00" + p.Name + "\x00" + p.Role + "\x00"))
	m.Write(p.Claims)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:9])
}

func (pg *pager) mac(tool string, payload []byte) []byte {
	m := hmac.New(sha256.New, pg.key)
	m.Write([]byte("page\x00" + tool + "\x00"))
	m.Write(payload)
	return m.Sum(nil)[:pageMACBytes]
}

// issue makes the token that continues st for p.
func (pg *pager) issue(p Principal, st *pageState) string {
	st.Expires = pg.now().Add(pg.ttl).Unix()
	st.Who = pg.whoHash(p)
	payload, err := json.Marshal(st)
	if err != nil { // the state holds strings, numbers and lists only
		panic(fmt.Sprintf("tools: encoding a page token: %v", err))
	}
	buf := make([]byte, 0, 1+len(payload)+pageMACBytes)
	buf = append(buf, pageTokenVersion)
	buf = append(buf, payload...)
	buf = append(buf, pg.mac(st.Tool, payload)...)
	return base64.RawURLEncoding.EncodeToString(buf)
}

// pageTokenError is the refusal of a page token the caller cannot use; fix says how to go on.
func pageTokenError(why, fix string) *Error {
	return errorf(ErrInvalidArguments, fix, "Invalid arguments: page_token %s", why)
}

const restartFix = "Call again without page_token (and without offset) to read from the first page; its answer's next_page continues from there."

// open checks token for a call of tool by p and returns its state. Refusals say which of
// tampered, expired or foreign it is, never echoing the token.
func (pg *pager) open(p Principal, tool, token string) (*pageState, *Error) {
	if len(token) > pageTokenMaxLen {
		return nil, pageTokenError("is not a token this runner issued", "Send next_page exactly as an answer gave it. "+restartFix)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(token))
	if err != nil || len(raw) < 1+pageMACBytes+2 || raw[0] != pageTokenVersion {
		return nil, pageTokenError("is not a token this runner issued", "Send next_page exactly as an answer gave it. "+restartFix)
	}
	payload, sum := raw[1:len(raw)-pageMACBytes], raw[len(raw)-pageMACBytes:]
	if !hmac.Equal(sum, pg.mac(tool, payload)) {
		return nil, pageTokenError("was changed, was issued by another tool, or was made by a runner with another page token key",
			"Send next_page exactly as the answer gave it, to the tool that gave it; replicas continue each other's tokens only when they share page_tokens.key_file. "+restartFix)
	}
	var st pageState
	if err := decodeJSON(payload, &st); err != nil {
		return nil, pageTokenError("is not a token this runner issued", restartFix)
	}
	st.Tool = tool
	if !hmac.Equal([]byte(st.Who), []byte(pg.whoHash(p))) {
		return nil, pageTokenError("was issued to another caller", "A page token works only for the caller it was issued to. "+restartFix)
	}
	if pg.now().Unix() > st.Expires {
		return nil, pageTokenError(fmt.Sprintf("expired (tokens last %s)", formatTTL(pg.ttl)), restartFix)
	}
	return &st, nil
}

func formatTTL(d time.Duration) string {
	if d%time.Minute == 0 {
		return fmt.Sprintf("%d minutes", int(d/time.Minute))
	}
	return d.String()
}

// pageSpec is what a tool that pages keeps in its tokens: the arguments a token fixes (bound),
// those it carries for a call that leaves them out but lets change (carried), each argument's
// name inside the token (short; "" keeps the name) and how its value is normalized.
type pageSpec struct {
	bound, carried []string
	short          map[string]string
	norm           func(k string, v any) (any, bool)
}

// selectPages is select_query's.
var selectPages = &pageSpec{bound: pageBound, carried: pageCarried, short: pageArgKeys, norm: normalizedArg}

// customPages is an operator-defined read tool's: its parameters fix the rows, as given.
func customPages(t CustomTool) *pageSpec {
	names := make([]string, len(t.Parameters))
	for i, p := range t.Parameters {
		names[i] = p.Name
	}
	return &pageSpec{bound: names, carried: []string{"format"}, norm: func(_ string, v any) (any, bool) { return v, true }}
}

// describePages is describe_schema's: which tables, or which of a table's columns, match is
// fixed; how many a page holds and in what detail may change. A token continues after the key
// of the last table sent (rank, schema, name) or the attnum of the last column.
var describePages = &pageSpec{bound: []string{"database", "table", "schema", "search", "kind"}, carried: []string{"limit", "detail"},
	short: map[string]string{"database": "d", "table": "t", "schema": "s", "search": "q", "kind": "k", "limit": "l", "detail": "v"},
	norm: func(k string, v any) (any, bool) {
		switch k {
		case "database", "limit", "table":
			return normalizedArg(k, v)
		}
		s, ok := v.(string)
		if k == "search" && ok { // the words are what a search means
			s = strings.Join(discovery.Words(s), " ")
		}
		if v == nil || (ok && s == "") {
			return nil, true
		}
		return s, ok
	}}

func (s *pageSpec) key(k string) string { return cmp.Or(s.short[k], k) }

func (s *pageSpec) all() []string { return append(slices.Clone(s.bound), s.carried...) }

// pageBound lists the arguments a select_query token fixes, because they decide which rows match and in what
// order; a call with page_token may repeat them or leave them out, but not change them. limit
// and format only shape the page, so a call may change them; left out, they are the token's.
var pageBound = []string{"database", "table", "columns", "where", "params", "order_by"}

// pageCarried are the arguments a token also carries, so that page_token alone continues.
var pageCarried = []string{"limit", "format"}

// pageArgKeys are the short names a token gives the arguments it carries: every byte of a token
// is paid for twice, when the model reads it and when it writes it back.
var pageArgKeys = map[string]string{"database": "d", "table": "t", "columns": "c", "where": "w", "params": "p",
	"order_by": "o", "limit": "l", "format": "f"}

// args is the normalized form of a call's arguments that a token carries, by short name.
func (s *pageSpec) args(m map[string]any) map[string]any {
	out := map[string]any{}
	for _, k := range s.all() {
		if v, ok := s.norm(k, m[k]); ok && v != nil {
			out[s.key(k)] = v
		}
	}
	return out
}

// normalizedArg is v as a token holds argument k: nil when it means the default, ok false when
// it has a type the schema will refuse anyway.
func normalizedArg(k string, v any) (any, bool) {
	switch k {
	case "database":
		s, ok := v.(string)
		if v == nil || (ok && (s == "" || s == "default")) {
			return nil, true // the default database, which a token need not name
		}
		return s, ok
	case "columns":
		switch v.(type) {
		case nil, string, []any:
		default:
			return nil, false
		}
		names := ident.List(v)
		if len(names) == 0 || (len(names) == 1 && names[0] == "*") {
			return nil, true
		}
		out := make([]any, len(names))
		for i, n := range names {
			out[i] = n
		}
		return out, true
	case "params":
		list, err := paramList(v)
		if err != nil {
			return nil, false
		}
		if len(list) == 0 {
			return nil, true
		}
		return list, true
	case "where", "order_by", "table", "format":
		if v == nil {
			return nil, true
		}
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		if k == "where" || k == "order_by" {
			s = ident.TrimSpace(s)
		}
		if s == "" {
			return nil, true
		}
		return s, true
	case "limit":
		if v == nil {
			return nil, true
		}
		n, ok := v.(json.Number)
		return n, ok
	}
	return nil, false
}

// mergePage checks a call's arguments m against the token's and fills in those the call left
// out, so that the call then validates and runs as the first page's call did.
func (s *pageSpec) merge(m map[string]any, st *pageState) *Error {
	if _, ok := m["offset"]; ok {
		return errorf(ErrInvalidArguments, "Send page_token without offset: the token knows where the next page starts.",
			"Invalid arguments: page_token and offset cannot be combined")
	}
	var changed []string
	for _, k := range s.bound {
		v, given := m[k]
		if !given {
			continue
		}
		// A value that cannot be normalized (a type the schema refuses, or an argument this
		// spec does not know how to compare) counts as changed: fail closed.
		if got, ok := s.norm(k, v); !ok || !sameJSON(got, st.Args[s.key(k)]) {
			changed = append(changed, k)
		}
	}
	if len(changed) > 0 {
		return errorf(ErrInvalidArguments,
			"Send page_token alone, or with the same "+strings.Join(changed, ", ")+" as the call that returned it; to read with other arguments, call without page_token.",
			"Invalid arguments: page_token was issued for a call with other %s", strings.Join(changed, ", "))
	}
	for _, k := range s.all() {
		if _, given := m[k]; !given && st.Args[s.key(k)] != nil {
			m[k] = st.Args[s.key(k)]
		}
	}
	return nil
}

// next is the token that continues a read of tool after the last row of rs: by that row's order
// values when keyed, else by offset (the rows read before rs, and rs's).
func (pa *paging) next(tool string, args map[string]any, rs *wire.RowSet, keyed bool, offset int64) string {
	st := &pageState{Tool: tool, Args: pa.spec.args(args)}
	if keyed {
		st.After = make([]*string, len(rs.LastKey))
		for i, v := range rs.LastKey {
			if v != nil {
				s := string(v)
				st.After[i] = &s
			}
		}
	} else {
		st.Offset = offset + int64(rs.RowCount)
	}
	return pa.pages.issue(pa.caller, st)
}

// nextAfter is the token that continues a call of tool after the key after (describe_schema's).
func (pa *paging) nextAfter(tool string, args map[string]any, after ...string) string {
	st := &pageState{Tool: tool, Args: pa.spec.args(args), After: make([]*string, len(after))}
	for i := range after {
		st.After[i] = &after[i]
	}
	return pa.pages.issue(pa.caller, st)
}

func sameJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}
