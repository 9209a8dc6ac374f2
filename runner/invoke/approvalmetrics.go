package invoke

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgtools/pgtools/tools/approval"
)

// ApprovalStats is what metrics read from the approval store (approval.Store).
type ApprovalStats interface {
	// Counts returns the pending requests and the events so far.
	Counts() approval.Counts
}

var (
	approvalsPending = prometheus.NewDesc("pgtools_approvals_pending",
		"Approval requests waiting for an approver's decision now.", nil, nil)
	approvalEvents = prometheus.NewDesc("pgtools_approval_events_total",
		`Approval requests by what happened to them: "requested" (a call waits for approval), "approved", "denied", "expired" (undecided, or approved and not used, in time), "used" (the approved call committed), "mismatched" (the approved call would have changed other rows; rolled back).`,
		[]string{"event"}, nil)
)

// approvalCollector reads the approval store at scrape time, so the figures are the store's own
// and no call path pays for them.
type approvalCollector struct{ store ApprovalStats }

// Describe implements prometheus.Collector.
func (c approvalCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- approvalsPending
	ch <- approvalEvents
}

// Collect implements prometheus.Collector. Every event of approval.Events is reported,
// 0 until it happens, so a rate() over it starts from the runner's start.
func (c approvalCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.store.Counts()
	ch <- prometheus.MustNewConstMetric(approvalsPending, prometheus.GaugeValue, float64(counts.Pending))
	for _, ev := range approval.Events {
		ch <- prometheus.MustNewConstMetric(approvalEvents, prometheus.CounterValue, float64(counts.Events[ev]), ev)
	}
}

// WatchApprovals exports the approval store's pending requests and events
// (pgtools_approvals_pending, pgtools_approval_events_total). Call it once.
func (m *Metrics) WatchApprovals(store ApprovalStats) {
	m.registry.MustRegister(approvalCollector{store: store})
}
