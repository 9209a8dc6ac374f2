package invoke

import (
	"testing"

	"github.com/pgtools/pgtools/tools/approval"
)

// countsOf is a fixed set of approval figures.
type countsOf approval.Counts

func (c countsOf) Counts() approval.Counts { return approval.Counts(c) }

// TestApprovalMetricsEveryEvent walks approval.Events: each is exported under its own
// label with the store's figure, 0 before it happens, beside the pending gauge.
func TestApprovalMetricsEveryEvent(t *testing.T) {
	t.Parallel()
	counts := countsOf{Pending: 3, Events: map[string]int64{}}
	for i, ev := range approval.Events {
		if i > 0 { // the first event stays unset: it must still be exported, as 0
			counts.Events[ev] = int64(10 + i)
		}
	}
	m := NewMetricsFor(nil, nil)
	m.WatchApprovals(counts)
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got, pending := map[string]float64{}, -1.0
	for _, mf := range families {
		switch mf.GetName() {
		case "pgtools_approvals_pending":
			pending = mf.GetMetric()[0].GetGauge().GetValue()
		case "pgtools_approval_events_total":
			for _, s := range mf.GetMetric() {
				if l := s.GetLabel(); len(l) == 1 && l[0].GetName() == "event" {
					got[l[0].GetValue()] = s.GetCounter().GetValue()
				}
			}
		}
	}
	if pending != 3 {
		t.Errorf("pgtools_approvals_pending %v, want 3", pending)
	}
	if len(got) != len(approval.Events) {
		t.Errorf("event series %v, want one per event of %v", got, approval.Events)
	}
	for _, ev := range approval.Events {
		if v, ok := got[ev]; !ok || v != float64(counts.Events[ev]) {
			t.Errorf("event %s: %v (exported: %v), want %d", ev, v, ok, counts.Events[ev])
		}
	}
}
