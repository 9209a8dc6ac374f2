package approval

import (
	"strings"
	"testing"
	"time"

	"github.com/pgtools/pgtools/tools/internal/pgerr"
)

// TestStoreDecisions walks one request through the store without a database: the credential
// that asked neither sees nor decides it, a party without the approve scope gets its refusal,
// an approval is claimed by the same call only, once at a time, and every event is audited.
func TestStoreDecisions(t *testing.T) {
	now := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	var events []string
	s := NewStore(Options{TTL: time.Minute, Now: func() time.Time { return now },
		Audit: func(ev Event) { events = append(events, ev.What+":"+ev.Approver) }})
	asker := Party{Name: "agent:alice", Credential: "agent", Approver: true}
	call := Call{Party: asker, Database: "default", Tool: "delete_data", Digest: "sha256:x"}
	eff := Effect{Tables: []TableRows{{Schema: "public", Name: "orders", Rows: 3}, {Name: "audit", Rows: 1, hidden: true}}, Total: 4, Commands: []string{"DELETE"}}
	ap, e := s.Ask(call, eff, []string{Rule{When: WhenRowsOver, Rows: 2}.String()})
	if e != nil {
		t.Fatal(e)
	}
	req := RequiredError(&ap, "was made")
	if req.Type != pgerr.ErrApprovalRequired || strings.Contains(req.Message+string(req.Approval), `"audit"`) || !strings.Contains(req.Message, "3 rows of public.orders, 1 rows of (tables your role cannot read) (DELETE)") {
		t.Fatalf("approval_required: %s %s", req.Message, req.Approval)
	}
	if id, digest, ok := FromError(req); !ok || id != ap.ID || digest != "sha256:x" {
		t.Fatalf("FromError: %q %q %v", id, digest, ok)
	}

	sibling := Party{Name: "agent:bob", Credential: "agent", Approver: true}
	if _, e := s.Decide(sibling, ap.ID, true); e == nil || e.Type != pgerr.ErrNotAllowed || len(s.Pending(sibling)) != 0 {
		t.Fatalf("the credential that asked decided or saw its request: %v", e)
	}
	refusal := &pgerr.Error{Type: pgerr.ErrNotAllowed, Message: "no approve scope"}
	if _, e := s.Decide(Party{Name: "x", Refusal: refusal}, ap.ID, true); e == nil || e.Message != "no approve scope" || e == refusal {
		t.Fatalf("a party without the approve scope: %v", e)
	}
	if _, e := s.Decide(Party{Name: "elsewhere", Approver: true, Databases: []string{"other"}}, ap.ID, true); e == nil || !strings.Contains(e.Message, "No approval request") {
		t.Fatalf("an approver of another database: %v", e)
	}
	if _, e := s.Claim(call, ap.ID); e == nil || e.Type != pgerr.ErrApprovalRequired {
		t.Fatalf("a pending request was claimed: %v", e)
	}
	boss := Party{Name: "boss", Approver: true}
	if list := s.Pending(boss); len(list) != 1 || list[0].ID != ap.ID {
		t.Fatalf("the approver's list: %+v", list)
	}
	if _, e := s.Decide(boss, ap.ID, true); e != nil {
		t.Fatal(e)
	}
	other := call
	other.Digest = "sha256:y"
	if _, e := s.Claim(other, ap.ID); e == nil || !strings.Contains(e.Message, "another call") {
		t.Fatalf("claimed by another call: %v", e)
	}
	claimed, e := s.Claim(call, ap.ID)
	if e != nil {
		t.Fatal(e)
	}
	if _, e := s.Claim(call, ap.ID); e == nil || !strings.Contains(e.Message, "being used") {
		t.Fatalf("claimed twice: %v", e)
	}
	measured := eff
	measured.Total++
	if eff.Same(measured) || !eff.Same(claimed.Effect) {
		t.Fatal("Same")
	}
	s.Finish(claimed, Mismatched, &measured)
	if m := MismatchError(claimed, measured); m.Type != pgerr.ErrApprovalMismatch || !strings.Contains(string(m.Approval), `"measured"`) {
		t.Fatalf("approval_mismatch: %v %s", m, m.Approval)
	}
	if got := strings.Join(events, " "); got != "requested: approved:boss mismatched:" {
		t.Fatalf("events: %s", got)
	}
	now = now.Add(3 * time.Minute) // past expiry and a TTL more: forgotten
	if c := s.Counts(); c.Pending != 0 || c.Events["mismatched"] != 1 {
		t.Fatalf("counts: %+v", c)
	}
	if _, ok := s.Own(asker, ap.ID); ok {
		t.Fatal("an ended request was kept past its TTL")
	}
}
