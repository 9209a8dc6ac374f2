package approval

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// Backend keeps a Store's requests: the memory of one runner (NewMemory), or rows that every
// runner of a fleet shares (a PostgreSQL schema, runner/state). Each method changes one request
// atomically and decides a race by itself: of two Decides or two Claims of one request, exactly
// one succeeds, even from two processes. A shared backend keeps time by its own clock; an error
// means the backend could not be reached and nothing was changed.
type Backend interface {
	// Shared reports whether other runners share the backend.
	Shared() bool
	// Sweep ends as expired every pending or approved, unclaimed request past its expiry,
	// and every approved request claimed longer than hold ago, and returns them; it forgets
	// the requests that ended more than ttl ago.
	Sweep(ctx context.Context, ttl, hold time.Duration) (expired []Record, err error)
	// Insert adds r as a pending request created now and expiring ttl later, unless its
	// credential already has max pending ones: then it returns their number (n >= max) and
	// adds nothing.
	Insert(ctx context.Context, r Record, ttl time.Duration, max int) (added Record, n int, err error)
	// Get returns request id; ok false when there is none.
	Get(ctx context.Context, id string) (r Record, ok bool, err error)
	// Pending returns every pending request.
	Pending(ctx context.Context) ([]Record, error)
	// CountPending counts the pending requests.
	CountPending(ctx context.Context) (int, error)
	// Decide approves (expiring ttl later) or denies request id for approver if it is still
	// pending and unexpired: done reports it; r is the request as it then stands.
	Decide(ctx context.Context, id, approver string, approve bool, ttl time.Duration) (r Record, done bool, err error)
	// Claim marks request id claimed with token if it is approved, unexpired and unclaimed:
	// won reports it; r is the request as it then stands.
	Claim(ctx context.Context, id, token string) (r Record, won bool, err error)
	// Finish ends the claim token holds on request id: Approved hands it back (it stays
	// approved unless it ended meanwhile), Used or Mismatched (with measured) end the request.
	Finish(ctx context.Context, id, token string, status Status, measured *Effect) (Record, error)
}

// Record is a request as a Backend keeps it: the Request with the credential that asked and
// the token of the claim running it ("" when none).
type Record struct {
	Request
	Credential string
	Claim      string
}

// request is r as the store hands it out.
func (r Record) request() Request {
	ap := r.Request
	ap.credential, ap.claim, ap.inUse = r.Credential, r.Claim, r.Claim != ""
	return ap
}

// storedTable is a TableRows as a backend stores it: hidden included.
type storedTable struct {
	Schema string `json:"schema"`
	Name   string `json:"name"`
	Rows   int64  `json:"rows"`
	Hidden bool   `json:"hidden,omitempty"`
}

type storedEffect struct {
	Effect
	Tables []storedTable `json:"tables"`
}

// EncodeEffect is e as a backend stores it (JSON), with what the caller may not see.
func EncodeEffect(e Effect) []byte {
	s := storedEffect{Effect: e, Tables: []storedTable{}}
	for _, t := range e.Tables {
		s.Tables = append(s.Tables, storedTable{t.Schema, t.Name, t.Rows, t.hidden})
	}
	b, _ := json.Marshal(s) // plain strings, numbers and booleans
	return b
}

// DecodeEffect reads what EncodeEffect wrote.
func DecodeEffect(b []byte) (Effect, error) {
	var s storedEffect
	if err := json.Unmarshal(b, &s); err != nil {
		return Effect{}, err
	}
	e := s.Effect
	e.Tables = nil
	for _, t := range s.Tables {
		e.Tables = append(e.Tables, TableRows{Schema: t.Schema, Name: t.Name, Rows: t.Rows, hidden: t.Hidden})
	}
	return e, nil
}

// memory is the Backend of one runner: a map under a mutex, by the clock now.
type memory struct {
	mu   sync.Mutex
	now  func() time.Time
	byID map[string]*Record
}

// NewMemory is a Backend in this process's memory, by the clock now (nil: time.Now): a restart
// forgets it, and no other runner sees it.
func NewMemory(now func() time.Time) Backend {
	if now == nil {
		now = time.Now
	}
	return &memory{now: now, byID: map[string]*Record{}}
}

func (m *memory) Shared() bool { return false }

func (m *memory) Sweep(_ context.Context, ttl, _ time.Duration) ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	var out []Record
	for id, r := range m.byID {
		switch {
		case (r.Status == Pending || r.Status == Approved && r.Claim == "") && !now.Before(r.Expires):
			r.Status = Expired
			out = append(out, *r)
		case r.Status != Pending && r.Status != Approved && now.Sub(r.Expires) > ttl:
			delete(m.byID, id)
		}
	}
	return out, nil
}

func (m *memory) Insert(_ context.Context, r Record, ttl time.Duration, max int) (Record, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, o := range m.byID {
		if o.Status == Pending && o.Credential == r.Credential {
			n++
		}
	}
	if n >= max {
		return Record{}, n, nil
	}
	now := m.now()
	r.Created, r.Expires = now, now.Add(ttl)
	m.byID[r.ID] = &r
	return r, n, nil
}

func (m *memory) Get(_ context.Context, id string) (Record, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.byID[id]
	if !ok {
		return Record{}, false, nil
	}
	return *r, true, nil
}

func (m *memory) Pending(context.Context) ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Record
	for _, r := range m.byID {
		if r.Status == Pending {
			out = append(out, *r)
		}
	}
	return out, nil
}

func (m *memory) CountPending(ctx context.Context) (int, error) {
	list, err := m.Pending(ctx)
	return len(list), err
}

func (m *memory) Decide(_ context.Context, id, approver string, approve bool, ttl time.Duration) (Record, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.byID[id]
	if !ok {
		return Record{}, false, nil
	}
	now := m.now()
	if r.Status != Pending || !now.Before(r.Expires) {
		return *r, false, nil
	}
	r.Approver, r.Decided = approver, &now
	if approve {
		r.Status, r.Expires = Approved, now.Add(ttl)
	} else {
		r.Status = Denied
	}
	return *r, true, nil
}

func (m *memory) Claim(_ context.Context, id, token string) (Record, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.byID[id]
	if !ok {
		return Record{}, false, nil
	}
	if r.Status != Approved || r.Claim != "" || !m.now().Before(r.Expires) {
		return *r, false, nil
	}
	r.Claim = token
	return *r, true, nil
}

func (m *memory) Finish(_ context.Context, id, token string, status Status, measured *Effect) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.byID[id]
	if !ok || r.Claim != token {
		return Record{}, nil
	}
	r.Claim = ""
	if status != Approved {
		r.Status, r.Measured = status, measured
	}
	return *r, nil
}
