package httpapi

import (
	"context"
	"sync"
	"time"

	"github.com/pgtools/pgtools/tools"
)

// SignIns keeps the approvals page's sign-ins, each by the SHA-256 of its cookie's random id.
// MemorySignIns (the default) keeps them in one process; a fleet with a state database shares
// them there (runner), so a browser whose requests a proxy spreads over the replicas stays
// signed in on every one. Implementations are safe for concurrent use.
type SignIns interface {
	// Put stores a sign-in under key, at now (the page's clock, as Get's).
	Put(ctx context.Context, key [32]byte, s SignIn, now time.Time) error
	// Get is the sign-in under key, if it has not ended by now.
	Get(ctx context.Context, key [32]byte, now time.Time) (SignIn, bool, error)
	// Delete ends the sign-in under key.
	Delete(ctx context.Context, key [32]byte) error
	// SetFlash records the outcome of the sign-in's last decision; TakeFlash returns and clears
	// it, so the next page shows it once.
	SetFlash(ctx context.Context, key [32]byte, msg string, isErr bool) error
	TakeFlash(ctx context.Context, key [32]byte) (msg string, isErr bool, err error)
}

// SignIn is one approver signed in to the page.
type SignIn struct {
	Principal tools.Principal
	CSRF      string
	Expires   time.Time
	// Auth is the fingerprint of the credentials the runner accepted at sign-in
	// (auth.Authenticator.Fingerprint): the sign-in holds only while it is the current one.
	Auth string
}

// memorySignInsMax bounds the sign-ins a MemorySignIns holds; past it the one closest to its
// end goes.
const memorySignInsMax = 1000

// MemorySignIns keeps sign-ins in this process: a restart signs everyone out.
type MemorySignIns struct {
	mu sync.Mutex
	m  map[[32]byte]*memorySignIn
}

type memorySignIn struct {
	SignIn
	flash      string
	flashError bool
}

// NewMemorySignIns makes an empty MemorySignIns.
func NewMemorySignIns() *MemorySignIns { return &MemorySignIns{m: map[[32]byte]*memorySignIn{}} }

// Put implements SignIns, dropping ended sign-ins and, past memorySignInsMax, the one that
// would end first.
func (m *MemorySignIns) Put(_ context.Context, key [32]byte, s SignIn, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, v := range m.m {
		if !now.Before(v.Expires) {
			delete(m.m, k)
		}
	}
	if len(m.m) >= memorySignInsMax {
		var oldest [32]byte
		var at time.Time
		for k, v := range m.m {
			if at.IsZero() || v.Expires.Before(at) {
				oldest, at = k, v.Expires
			}
		}
		delete(m.m, oldest)
	}
	m.m[key] = &memorySignIn{SignIn: s}
	return nil
}

// Get implements SignIns.
func (m *MemorySignIns) Get(_ context.Context, key [32]byte, now time.Time) (SignIn, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.m[key]
	if !ok {
		return SignIn{}, false, nil
	}
	if !now.Before(s.Expires) {
		delete(m.m, key)
		return SignIn{}, false, nil
	}
	return s.SignIn, true, nil
}

// Delete implements SignIns.
func (m *MemorySignIns) Delete(_ context.Context, key [32]byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, key)
	return nil
}

// SetFlash implements SignIns.
func (m *MemorySignIns) SetFlash(_ context.Context, key [32]byte, msg string, isErr bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.m[key]; ok {
		s.flash, s.flashError = msg, isErr
	}
	return nil
}

// TakeFlash implements SignIns.
func (m *MemorySignIns) TakeFlash(_ context.Context, key [32]byte) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.m[key]
	if !ok {
		return "", false, nil
	}
	msg, isErr := s.flash, s.flashError
	s.flash, s.flashError = "", false
	return msg, isErr, nil
}
