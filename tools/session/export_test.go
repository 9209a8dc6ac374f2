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
