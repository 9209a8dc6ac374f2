package session

import "context"

// Test hooks into the spare connections.

// TidySpares runs the check and fill a tick of Run does, and waits for the fills it started.
func (m *Manager) TidySpares(ctx context.Context) {
	m.spares.tidy(ctx)
	m.spares.wait()
}

// WaitSpares waits until no fill runs.
func (m *Manager) WaitSpares() { m.spares.wait() }

// SpareCount is how many spares database holds.
func (m *Manager) SpareCount(database string) int { return m.spares.count(database) }

// Boot is the manager's boot group, the second group of its session ids.
func (m *Manager) Boot() string { return m.boot }

// wait returns once no fill runs.
func (sp *spares) wait() { sp.fills.Wait() }

// count is how many spares database holds now.
func (sp *spares) count(database string) int {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if s := sp.sets[database]; s != nil {
		return len(s.conns)
	}
	return 0
}
