// Package approvaltest holds the behavioural tests every approval.Backend passes, run against a
// Store over that backend: the memory backend in package approval's tests, the PostgreSQL one
// in runner/state's. It is for tests only.
package approvaltest

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgtools/pgtools/tools/approval"
	"github.com/pgtools/pgtools/tools/internal/pgerr"
)

// NewStore makes a store over a fresh, empty backend of the kind under test with options o
// (o.Backend is left for it to set).
type NewStore func(t *testing.T, o approval.Options) *approval.Store

// events records the audited events.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) audit(ev approval.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, ev.What+":"+ev.Approver)
}

func (e *events) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.got, " ")
}

var (
	asker   = approval.Party{Name: "agent:alice", Credential: "agent", Approver: true}
	sibling = approval.Party{Name: "agent:bob", Credential: "agent", Approver: true}
	boss    = approval.Party{Name: "boss", Approver: true}
	call    = approval.Call{Party: asker, Database: "default", Tool: "delete_data", Digest: "sha256:x",
		Arguments: json.RawMessage(`{"table":"orders","where":"total <= $1"}`)}
	hiddenEffect = `{"tables":[{"schema":"public","name":"orders","rows":3},{"schema":"","name":"audit","rows":1,"hidden":true}],"total":4,"commands":["DELETE"]}`
)

func effect(t *testing.T) approval.Effect {
	e, err := approval.DecodeEffect([]byte(hiddenEffect))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// Run runs every behavioural test over stores mk makes.
func Run(t *testing.T, mk NewStore) {
	t.Run("Decisions", func(t *testing.T) { decisions(t, mk) })
	t.Run("MaxPending", func(t *testing.T) { maxPending(t, mk) })
	t.Run("Expiry", func(t *testing.T) { expiry(t, mk) })
	t.Run("HandBackAndUse", func(t *testing.T) { handBack(t, mk) })
	t.Run("Deny", func(t *testing.T) { deny(t, mk) })
}

// decisions: the credential that asked neither sees nor decides its request, a party without
// the approve scope gets its refusal, an approval is claimed by the same call only, once at a
// time, what the caller may not see stays hidden from it after a round trip through the
// backend, and every event is audited.
func decisions(t *testing.T, mk NewStore) {
	var ev events
	s := mk(t, approval.Options{TTL: time.Minute, Audit: ev.audit})
	ap, e := s.Ask(call, effect(t), []string{"rows over 2"})
	if e != nil {
		t.Fatal(e)
	}
	got, e := s.Get(boss, ap.ID)
	if e != nil {
		t.Fatal(e)
	}
	req := approval.RequiredError(&got, "was made")
	if req.Type != pgerr.ErrApprovalRequired || strings.Contains(req.Message+string(req.Approval), `"audit"`) ||
		!strings.Contains(req.Message, "3 rows of public.orders, 1 rows of (tables your role cannot read) (DELETE)") {
		t.Fatalf("approval_required after the backend: %s %s", req.Message, req.Approval)
	}
	if string(got.Arguments) != string(call.Arguments) || got.Status != approval.Pending || got.Principal != asker.Name || !got.Expires.After(got.Created) {
		t.Fatalf("the request as stored: %+v", got)
	}
	if _, e := s.Decide(sibling, ap.ID, true); e == nil || e.Type != pgerr.ErrNotAllowed || len(s.Pending(sibling)) != 0 {
		t.Fatalf("the credential that asked decided or saw its request: %v", e)
	}
	refusal := &pgerr.Error{Type: pgerr.ErrNotAllowed, Message: "no approve scope"}
	if _, e := s.Decide(approval.Party{Name: "x", Refusal: refusal}, ap.ID, true); e == nil || e.Message != "no approve scope" || e == refusal {
		t.Fatalf("a party without the approve scope: %v", e)
	}
	if _, e := s.Decide(approval.Party{Name: "elsewhere", Approver: true, Databases: []string{"other"}}, ap.ID, true); e == nil || !strings.Contains(e.Message, "No approval request") {
		t.Fatalf("an approver of another database: %v", e)
	}
	if _, e := s.Claim(call, ap.ID); e == nil || e.Type != pgerr.ErrApprovalRequired {
		t.Fatalf("a pending request was claimed: %v", e)
	}
	if list := s.Pending(boss); len(list) != 1 || list[0].ID != ap.ID {
		t.Fatalf("the approver's list: %+v", list)
	}
	if c := s.Counts(); c.Pending != 1 {
		t.Fatalf("counts: %+v", c)
	}
	if _, e := s.Decide(boss, ap.ID, true); e != nil {
		t.Fatal(e)
	}
	if _, e := s.Decide(boss, ap.ID, false); e == nil || !strings.Contains(e.Message, "is approved") {
		t.Fatalf("decided twice: %v", e)
	}
	other := call
	other.Digest = "sha256:y"
	if _, e := s.Claim(other, ap.ID); e == nil || !strings.Contains(e.Message, "another call") {
		t.Fatalf("claimed by another call: %v", e)
	}
	stranger := call
	stranger.Party = approval.Party{Name: "mallory"}
	if _, e := s.Claim(stranger, ap.ID); e == nil || !strings.Contains(e.Message, "No approval request") {
		t.Fatalf("claimed by another party: %v", e)
	}
	claimed, e := s.Claim(call, ap.ID)
	if e != nil {
		t.Fatal(e)
	}
	if _, e := s.Claim(call, ap.ID); e == nil || !strings.Contains(e.Message, "being used") {
		t.Fatalf("claimed twice: %v", e)
	}
	measured := effect(t)
	measured.Total++
	if !effect(t).Same(claimed.Effect) {
		t.Fatal("the claimed effect is not the asked one")
	}
	s.Finish(claimed, approval.Mismatched, &measured)
	if m := approval.MismatchError(claimed, measured); m.Type != pgerr.ErrApprovalMismatch || !strings.Contains(string(m.Approval), `"measured"`) {
		t.Fatalf("approval_mismatch: %v %s", m, m.Approval)
	}
	if mine, ok := s.Own(asker, ap.ID); !ok || mine.Status != approval.Mismatched || mine.Measured == nil || mine.Measured.Total != 5 {
		t.Fatalf("after the mismatch: %+v %v", mine, ok)
	}
	if _, ok := s.Own(sibling, ap.ID); ok {
		t.Fatal("another party of the credential owns the request")
	}
	if _, e := s.Claim(call, ap.ID); e == nil || !strings.Contains(e.Message, "mismatched and cannot be used again") {
		t.Fatalf("claimed after its end: %v", e)
	}
	if got := ev.String(); got != "requested: approved:boss mismatched:" {
		t.Fatalf("events: %s", got)
	}
	if c := s.Counts(); c.Pending != 0 || c.Events["mismatched"] != 1 || c.Events["requested"] != 1 {
		t.Fatalf("counts: %+v", c)
	}
}

// maxPending: a credential's pending requests are bounded; another credential is not held back.
func maxPending(t *testing.T, mk NewStore) {
	s := mk(t, approval.Options{TTL: time.Minute, MaxPending: 2})
	for i := range 2 {
		if _, e := s.Ask(call, effect(t), []string{"r"}); e != nil {
			t.Fatalf("request %d: %v", i, e)
		}
	}
	if _, e := s.Ask(call, effect(t), []string{"r"}); e == nil || e.Type != pgerr.ErrRateLimited || !strings.Contains(e.Message, "2 approval requests") {
		t.Fatalf("a third pending request: %v", e)
	}
	c2 := call
	c2.Party = approval.Party{Name: "carol"}
	if _, e := s.Ask(c2, effect(t), []string{"r"}); e != nil {
		t.Fatalf("another credential was held back: %v", e)
	}
	if c := s.Counts(); c.Pending != 3 {
		t.Fatalf("pending: %+v", c)
	}
}

// expiry: a request nobody decides expires after the TTL, once, and then cannot be decided.
func expiry(t *testing.T, mk NewStore) {
	var ev events
	s := mk(t, approval.Options{TTL: 700 * time.Millisecond, Audit: ev.audit})
	ap, e := s.Ask(call, effect(t), []string{"r"})
	if e != nil {
		t.Fatal(e)
	}
	approved, e := s.Ask(call, effect(t), []string{"r"})
	if e != nil {
		t.Fatal(e)
	}
	if _, e := s.Decide(boss, approved.ID, true); e != nil {
		t.Fatal(e)
	}
	time.Sleep(time.Second)
	if _, e := s.Decide(boss, ap.ID, true); e == nil || !strings.Contains(e.Message, "expired") {
		t.Fatalf("decided after expiry: %v", e)
	}
	if _, e := s.Claim(call, approved.ID); e == nil || !strings.Contains(e.Message, "expired") {
		t.Fatalf("claimed after expiry: %v", e)
	}
	if got := ev.String(); strings.Count(got, "expired:") != 2 {
		t.Fatalf("events: %s", got)
	}
	if len(s.Pending(boss)) != 0 {
		t.Fatal("an expired request is listed")
	}
}

// handBack: a claim handed back (its call failed before comparing) leaves the approval usable;
// once used it is used up.
func handBack(t *testing.T, mk NewStore) {
	s := mk(t, approval.Options{TTL: time.Minute})
	ap, e := s.Ask(call, effect(t), []string{"r"})
	if e != nil {
		t.Fatal(e)
	}
	if _, e := s.Decide(boss, ap.ID, true); e != nil {
		t.Fatal(e)
	}
	c, e := s.Claim(call, ap.ID)
	if e != nil {
		t.Fatal(e)
	}
	s.Finish(c, approval.Approved, nil)
	c, e = s.Claim(call, ap.ID)
	if e != nil {
		t.Fatalf("claiming again after a hand back: %v", e)
	}
	s.Finish(c, approval.Used, nil)
	if _, e := s.Claim(call, ap.ID); e == nil || !strings.Contains(e.Message, "is used and cannot be used again") {
		t.Fatalf("used twice: %v", e)
	}
	if c := s.Counts(); c.Events["used"] != 1 {
		t.Fatalf("counts: %+v", c)
	}
}

// deny: a denied request answers not_allowed, naming who denied it.
func deny(t *testing.T, mk NewStore) {
	s := mk(t, approval.Options{TTL: time.Minute})
	ap, e := s.Ask(call, effect(t), []string{"r"})
	if e != nil {
		t.Fatal(e)
	}
	if d, e := s.Decide(boss, ap.ID, false); e != nil || d.Status != approval.Denied || d.Approver != "boss" || d.Decided == nil {
		t.Fatalf("deny: %+v %v", d, e)
	}
	if _, e := s.Claim(call, ap.ID); e == nil || e.Type != pgerr.ErrNotAllowed || !strings.Contains(e.Message, "denied by boss") {
		t.Fatalf("claim of a denied request: %v", e)
	}
}
