package invoke

import (
	"net/http"
	"runtime"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pgtools/pgtools/runner/version"
	"github.com/pgtools/pgtools/schemas"
	"github.com/pgtools/pgtools/tools"
)

// SessionStats is what metrics read from the session manager (session.Manager).
type SessionStats interface {
	// Open returns how many sessions are open now.
	Open() int
	// Expiries returns how many sessions expired since start.
	Expiries() uint64
}

// Metrics counts what an operator watches, on its own Prometheus registry (never the global
// one): tool calls by tool, database and outcome, latency, rows, truncations, sessions, pool
// statistics, database reachability, authentication failures and rate-limited calls. Labels hold
// only configured names (tools, databases) and fixed words, never caller input or principals,
// so their number stays bounded. It is safe for concurrent use.
//
// The per-call path is cheap: the label children of every (tool, database) pair are resolved
// once, so observing a successful call is a map lookup and a few atomic adds, without
// allocation.
type Metrics struct {
	registry     *prometheus.Registry
	calls        *prometheus.CounterVec
	authFailures *prometheus.CounterVec
	rateLimited  *prometheus.CounterVec
	databaseUp   *prometheus.GaugeVec
	byCall       map[callKey]*callMetrics // read-only after NewMetrics
	// later holds the children of tools a configuration reload added (custom tools), made on
	// their first call.
	later           sync.Map // callKey → *callMetrics
	duration        *prometheus.HistogramVec
	rows, truncated *prometheus.CounterVec
	generation      prometheus.Gauge
	reloads         *prometheus.CounterVec
	restartPending  prometheus.Gauge
}

var _ tools.Observer = (*Metrics)(nil)

type callKey struct{ tool, database string }

// callMetrics are the pre-resolved children of one (tool, database) pair.
type callMetrics struct {
	toolLabel, dbLabel string
	success            prometheus.Counter
	duration           prometheus.Observer
	rows               prometheus.Counter
	truncated          prometheus.Counter
}

// Label values for calls that name no known tool or reach no database.
const (
	unknownToolLabel = "unknown"
	noDatabaseLabel  = "none"
)

// NewMetrics builds the metrics of reg's tools and databases. sessions may be nil (no session
// metrics). It counts the calls of a registry built with it as tools.Options.Observer.
func NewMetrics(reg *tools.Registry, sessions SessionStats) *Metrics {
	var dbs []*tools.Database
	for _, name := range reg.Databases() {
		db, _ := reg.Database(name)
		dbs = append(dbs, db)
	}
	var names []string
	for _, t := range reg.Tools() {
		names = append(names, t.Name)
	}
	return newMetricsFor(dbs, names, sessions)
}

// NewMetricsFor builds the metrics of the built-in tools over dbs (Build's, before any registry).
func NewMetricsFor(dbs []*tools.Database, sessions SessionStats) *Metrics {
	return newMetricsFor(dbs, schemas.ToolNames(), sessions)
}

func newMetricsFor(dbList []*tools.Database, names []string, sessions SessionStats) *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{registry: r, byCall: map[callKey]*callMetrics{}}
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pgtools_tool_calls_total",
		Help: `Tool calls by tool, database and outcome ("success" or the errorType). Database "none": the call never reached one (bad arguments, a database the token may not use).`,
	}, []string{"tool", "database", "outcome"})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pgtools_tool_call_duration_seconds",
		Help:    "Time spent in a tool call, from validation to the result, in seconds.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"tool", "database"})
	rows := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pgtools_rows_returned_total",
		Help: "Rows returned to callers (rowCount of the results).",
	}, []string{"tool", "database"})
	truncated := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pgtools_truncated_results_total",
		Help: "Results cut at their row limit or byte cap (truncated: true).",
	}, []string{"tool", "database"})
	m.authFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pgtools_auth_failures_total",
		Help: `Requests refused for a missing ("missing") or unknown ("invalid") API token.`,
	}, []string{"reason"})
	m.rateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pgtools_rate_limited_total",
		Help: `Tool calls refused with rate_limited: over the token's rate ("rate") or its concurrent calls ("concurrency").`,
	}, []string{"reason"})
	m.databaseUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pgtools_database_up",
		Help: "1 when the last readiness check reached the database, else 0.",
	}, []string{"database"})
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pgtools_build_info",
		Help: "Always 1; labels carry the pgtools and Go versions.",
	}, []string{"version", "go_version"})
	build.WithLabelValues(version.Version, runtime.Version()).Set(1)
	r.MustRegister(m.calls, duration, rows, truncated, m.authFailures, m.rateLimited, m.databaseUp, build,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	m.duration, m.rows, m.truncated = duration, rows, truncated
	m.generation = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pgtools_config_generation",
		Help: "The generation of the configuration serving new calls: 1 at start, one more per accepted reload (SIGHUP).",
	})
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pgtools_config_reload_total",
		Help: `Configuration reloads (SIGHUP) by result: "ok" (the new configuration serves new calls) or "refused" (it failed a check; the previous one stays).`,
	}, []string{"result"})
	m.reloads.WithLabelValues("ok")
	m.reloads.WithLabelValues("refused")
	m.restartPending = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pgtools_config_restart_pending",
		Help: "Settings whose value in the configuration last loaded differs from the one running because a change of them needs a restart (docs/configuration.md: What a reload applies); 0 when the running process serves the configuration as loaded.",
	})
	r.MustRegister(m.generation, m.reloads, m.restartPending)

	dbNames := []string{""}
	for _, db := range dbList {
		dbNames = append(dbNames, db.Name)
		m.databaseUp.WithLabelValues(db.Name).Set(0)
	}
	for _, t := range append([]string{""}, names...) {
		for _, d := range dbNames {
			m.byCall[callKey{t, d}] = m.children(t, d)
		}
	}
	r.MustRegister(&poolCollector{dbs: dbList})
	if sessions != nil {
		r.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "pgtools_sessions_open",
			Help: "pg_tx sessions open now.",
		}, func() float64 { return float64(sessions.Open()) }))
		r.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "pgtools_session_expiries_total",
			Help: "pg_tx sessions rolled back because they stayed idle past their TTL.",
		}, func() float64 { return float64(sessions.Expiries()) }))
	}
	return m
}

// children resolves the label children of the pair (tool, database); "" stands for an unknown
// tool or no database.
func (m *Metrics) children(tool, database string) *callMetrics {
	tl, dl := tool, database
	if tl == "" {
		tl = unknownToolLabel
	}
	if dl == "" {
		dl = noDatabaseLabel
	}
	return &callMetrics{toolLabel: tl, dbLabel: dl,
		success:   m.calls.WithLabelValues(tl, dl, "success"),
		duration:  m.duration.WithLabelValues(tl, dl),
		rows:      m.rows.WithLabelValues(tl, dl),
		truncated: m.truncated.WithLabelValues(tl, dl)}
}

// ObserveCall implements tools.Observer.
func (m *Metrics) ObserveCall(ev tools.CallEvent) {
	key := callKey{ev.Tool, ev.Database}
	cm := m.byCall[key]
	if cm == nil {
		// A tool a reload added: Tool is still a registered name (never caller input), so the
		// labels stay bounded by the configuration.
		v, _ := m.later.LoadOrStore(key, m.children(ev.Tool, ev.Database))
		cm = v.(*callMetrics)
	}
	if ev.ErrorType == "" {
		cm.success.Inc()
	} else {
		m.calls.WithLabelValues(cm.toolLabel, cm.dbLabel, string(ev.ErrorType)).Inc()
	}
	cm.duration.Observe(ev.Duration.Seconds())
	if ev.Rows > 0 {
		cm.rows.Add(float64(ev.Rows))
	}
	if ev.Truncated {
		cm.truncated.Inc()
	}
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// Registry is the Prometheus registry behind Handler, for tests and embedding.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

func (m *Metrics) AuthFailed(missing bool) {
	if m == nil {
		return
	}
	reason := "invalid"
	if missing {
		reason = "missing"
	}
	m.authFailures.WithLabelValues(reason).Inc()
}

func (m *Metrics) limited(reason string) {
	if m != nil {
		m.rateLimited.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) SetDatabaseUp(name string, up bool) {
	if m == nil {
		return
	}
	v := 0.0
	if up {
		v = 1
	}
	m.databaseUp.WithLabelValues(name).Set(v)
}

// poolCollector reports pgxpool statistics of every database's stateless pool at scrape time.
// Session connections are not in these pools (docs/design.md §5) and are counted by pgtools_sessions_open.
type poolCollector struct {
	dbs []*tools.Database
}

var (
	poolConns = prometheus.NewDesc("pgtools_pool_connections",
		`Connections of the stateless pool by state: "idle", "acquired" (running a call) or "constructing".`,
		[]string{"database", "state"}, nil)
	poolMax = prometheus.NewDesc("pgtools_pool_max_connections",
		"Size limit of the stateless pool (max_conns).", []string{"database"}, nil)
	poolAcquires = prometheus.NewDesc("pgtools_pool_acquires_total",
		"Connections taken from the pool by calls.", []string{"database"}, nil)
	poolWaits = prometheus.NewDesc("pgtools_pool_acquire_waits_total",
		"Acquires that found no idle connection and had to wait for one (or for a new one to connect).", []string{"database"}, nil)
	poolWaitSeconds = prometheus.NewDesc("pgtools_pool_acquire_wait_seconds_total",
		"Time spent waiting in those acquires, in seconds.", []string{"database"}, nil)
	poolCanceled = prometheus.NewDesc("pgtools_pool_acquire_cancelled_total",
		"Acquires given up before a connection came: pool_wait_ms ran out (the call failed with timeout, statement never started) or the caller went away.",
		[]string{"database"}, nil)
	poolNew = prometheus.NewDesc("pgtools_pool_new_connections_total",
		"Connections opened by the pool; a rise without load means connections are being lost (restarts, network).", []string{"database"}, nil)
)

// Describe implements prometheus.Collector.
func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolConns, poolMax, poolAcquires, poolWaits, poolWaitSeconds, poolCanceled, poolNew} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	for _, db := range c.dbs {
		s := db.Pool.Stat()
		n := db.Name
		ch <- prometheus.MustNewConstMetric(poolConns, prometheus.GaugeValue, float64(s.IdleConns()), n, "idle")
		ch <- prometheus.MustNewConstMetric(poolConns, prometheus.GaugeValue, float64(s.AcquiredConns()), n, "acquired")
		ch <- prometheus.MustNewConstMetric(poolConns, prometheus.GaugeValue, float64(s.ConstructingConns()), n, "constructing")
		ch <- prometheus.MustNewConstMetric(poolMax, prometheus.GaugeValue, float64(s.MaxConns()), n)
		ch <- prometheus.MustNewConstMetric(poolAcquires, prometheus.CounterValue, float64(s.AcquireCount()), n)
		ch <- prometheus.MustNewConstMetric(poolWaits, prometheus.CounterValue, float64(s.EmptyAcquireCount()), n)
		ch <- prometheus.MustNewConstMetric(poolWaitSeconds, prometheus.CounterValue, s.EmptyAcquireWaitTime().Seconds(), n)
		ch <- prometheus.MustNewConstMetric(poolCanceled, prometheus.CounterValue, float64(s.CanceledAcquireCount()), n)
		ch <- prometheus.MustNewConstMetric(poolNew, prometheus.CounterValue, float64(s.NewConnsCount()), n)
	}
}

// setGeneration exports the generation of the configuration serving new calls.
func (m *Metrics) SetGeneration(n int64) { m.generation.Set(float64(n)) }

// SetRestartPending sets the number of loaded settings that wait for a restart.
func (m *Metrics) SetRestartPending(n int) { m.restartPending.Set(float64(n)) }

// Reloaded counts one configuration reload, accepted (ok) or refused.
func (m *Metrics) Reloaded(ok bool) {
	if ok {
		m.reloads.WithLabelValues("ok").Inc()
	} else {
		m.reloads.WithLabelValues("refused").Inc()
	}
}
