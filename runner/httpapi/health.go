package httpapi

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/invoke"
	"github.com/pgtools/pgtools/tools"
)

// Health answers /readyz: ready when no shutdown is under way and every configured database
// answers. Checks are shared: a check younger than a second is reused, so a flood of probes
// costs one ping per database per second. A database whose pool is busy to its limit counts as
// up (it is serving calls), so readiness does not flap under load. Transitions are logged and
// exported as pgtools_database_up. It is safe for concurrent use.
type Health struct {
	reg      *tools.Registry
	log      zerolog.Logger
	metrics  *invoke.Metrics
	draining atomic.Bool
	gen      atomic.Pointer[genInfo] // nil: no Runtime behind it (tests of the handler alone)

	mu      sync.Mutex // serializes checks; guards the fields below
	checked time.Time
	down    []string        // databases down at the last check, sorted
	up      map[string]bool // state at the last check, for logging transitions
}

// NewHealth returns the readiness state of reg's databases. metrics may be nil.
func NewHealth(reg *tools.Registry, log zerolog.Logger, m *invoke.Metrics) *Health {
	return &Health{reg: reg, log: log, metrics: m, up: map[string]bool{}}
}

// genInfo is the configuration generation /readyz reports.
type genInfo struct {
	N      int64  `json:"config_generation"`
	Loaded string `json:"config_loaded_at"`
}

func (h *Health) SetGeneration(n int64, loaded time.Time) {
	h.gen.Store(&genInfo{N: n, Loaded: loadedAt(loaded)})
}

// SetDraining marks the runner as shutting down: /readyz answers 503 from now on.
func (h *Health) SetDraining() { h.draining.Store(true) }

// Draining reports whether SetDraining was called.
func (h *Health) Draining() bool { return h.draining.Load() }

// checkMaxAge is how long a check's result is reused.
const checkMaxAge = time.Second

// Check returns the databases that did not answer, checking them again unless the last check is
// younger than a second. Every database is pinged concurrently, each for at most 2 seconds.
func (h *Health) Check(ctx context.Context) (down []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.checked.IsZero() && time.Since(h.checked) < checkMaxAge {
		return h.down
	}
	names := h.reg.Databases()
	ok := make([]bool, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		db, _ := h.reg.Database(name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = databaseAnswers(ctx, db)
			ok[i] = errs[i] == nil
		}()
	}
	wg.Wait()
	h.down = h.down[:0:0]
	for i, name := range names {
		h.metrics.SetDatabaseUp(name, ok[i])
		was, known := h.up[name]
		switch {
		case ok[i] && known && !was:
			h.log.Info().Str("database", name).Msg("database is reachable again")
		case !ok[i] && (!known || was):
			// pgx's connect errors name host, user and database and the cause (refused, TLS
			// verification, authentication), never the password: the operator needs the cause.
			h.log.Warn().Str("database", name).Str("reason", errs[i].Error()).
				Msg("database is not reachable; /readyz answers 503 until it is")
		}
		h.up[name] = ok[i]
		if !ok[i] {
			h.down = append(h.down, name)
		}
	}
	h.checked = time.Now()
	return h.down
}

// databaseAnswers pings db, counting a pool busy to its limit as up: every connection is running
// a call, which a dead database would not allow.
func databaseAnswers(ctx context.Context, db *tools.Database) error {
	if s := db.Pool.Stat(); s.AcquiredConns() >= s.MaxConns() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return db.Ping(ctx)
}

// Run checks the databases every interval until ctx ends, so pgtools_database_up and the logged
// transitions stay current without probes.
func (h *Health) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	h.Check(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.Check(ctx)
		}
	}
}

// readyReason is /readyz's body reason: how many databases are down, not which, because /readyz
// needs no token and database names are only shown to tokens that may use them. The log names
// them.
func readyReason(down []string, total int) string {
	if len(down) == 1 && total == 1 {
		return "the database is not reachable"
	}
	return fmt.Sprintf("%d of %d databases are not reachable", len(down), total)
}

// loadedAt formats a generation's load time as /readyz shows it.
func loadedAt(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
