// Package approval holds the approval requests of require_approval rules and the rules
// themselves: a write a Rule matches is measured in a transaction that is rolled back (its
// Effect, read with TableWritesSQL), a Request for it waits in the Store until an approver
// decides it, and the same call sent again with the approved request's id commits once, and
// only if it does exactly what was approved. The package knows nothing of the registry or of
// the call that asks: the caller names who asks and who decides (Party) and what was called
// (Call). A Store is safe for concurrent use; the other types are plain values.
package approval

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pgtools/pgtools/tools/internal/pgerr"
	"github.com/pgtools/pgtools/tools/internal/wire"
	"github.com/pgtools/pgtools/tools/words"
)

// Status is where an approval request stands.
type Status string

// The states of an approval request. pending → approved or denied (by an approver) or expired;
// approved → used (its call committed), mismatched (its call would have done something else)
// or expired. Only approved is ever usable, and only once.
const (
	Pending    Status = "pending"
	Approved   Status = "approved"
	Denied     Status = "denied"
	Expired    Status = "expired"
	Used       Status = "used"
	Mismatched Status = "mismatched"
)

// Events are the events a Store counts, in the order metrics list them.
var Events = []string{"requested", "approved", "denied", "expired", "used", "mismatched"}

// Request is one approval request: a call a rule stopped, bound to its principal, database,
// tool, arguments (by digest) and measured effect.
type Request struct {
	ID        string          `json:"id"`
	Status    Status          `json:"status"`
	Principal string          `json:"principal"`
	Database  string          `json:"database"`
	Tool      string          `json:"tool"`
	Digest    string          `json:"digest"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Effect    Effect          `json:"effect"`
	Rules     []string        `json:"rules"`
	Created   time.Time       `json:"createdAt"`
	Expires   time.Time       `json:"expiresAt"`
	Approver  string          `json:"approver,omitempty"`
	Decided   *time.Time      `json:"decidedAt,omitempty"`
	// Measured is what the approved call would have done instead (mismatched).
	Measured *Effect `json:"measured,omitempty"`

	credential string // the credential that asked; it may not decide
	inUse      bool   // an approved request claimed by a running call
	claim      string // the claim's token, which Finish hands the backend
}

// Party is a principal as the store knows it: the one that asks for a request, or the one
// that decides it.
type Party struct {
	// Name identifies the party: a request's Principal, a decision's Approver.
	Name string
	// Credential names the secret the party proves itself with, when several parties share
	// one (an act-as token's subjects); "" means Name. The credential that asked for a
	// request neither sees nor decides it.
	Credential string
	// Approver reports that the party holds the approve scope.
	Approver bool
	// Databases limits the databases whose requests the party may see and decide; empty
	// means all.
	Databases []string
	// Refusal is Decide's answer to a party that is not an Approver: the scope it lacks and
	// how to get it, in the words of how its scopes were granted. nil: a token's wording.
	Refusal *pgerr.Error
}

// credential is the secret p holds: Credential, else Name.
func (p Party) credential() string {
	if p.Credential != "" {
		return p.Credential
	}
	return p.Name
}

// mayDecide reports whether p may see and decide requests on database db, whoever asked.
func (p Party) mayDecide(db string) bool {
	return p.Approver && (len(p.Databases) == 0 || slices.Contains(p.Databases, db))
}

// Call is the call a request is made for, or an approval is claimed by: who makes it, on
// which database, with which tool and arguments.
type Call struct {
	Party    Party
	Database string
	Tool     string
	// Digest identifies the call (tool, database, arguments); an approval is used only by a
	// call with the same digest.
	Digest string
	// Arguments are the call's arguments as the approver reads them.
	Arguments json.RawMessage
}

// Event is one thing that happened to a request, as Options.Audit receives it.
type Event struct {
	// Time is when it happened, by the store's clock, in UTC.
	Time time.Time
	// What is one of Events.
	What string
	// Request is the request as it stands after the event (a copy).
	Request Request
	// Approver names who decided the request (approved, denied); "" for the other events.
	Approver string
}

// Options configure a store. Zero values take the defaults.
type Options struct {
	// TTL is how long a request waits for a decision, and how long an approval may then be
	// used (default 15 minutes).
	TTL time.Duration
	// MaxPending bounds the pending requests of one credential (default 20); past it a call
	// that needs approval is refused rate_limited. The backend counts them: with a shared
	// backend the bound holds for every store that shares it.
	MaxPending int
	// Audit receives each request, decision, expiry and outcome, with the store's counters
	// locked: it must not block for long nor call the store. nil: nobody.
	Audit func(Event)
	// Now is the clock of the memory backend (tests). nil: time.Now. A shared backend keeps
	// its own clock (the database's).
	Now func() time.Time
	// Backend keeps the requests. nil: NewMemory(Now), this process's memory.
	Backend Backend
	// Timeout bounds each backend operation (default 5 seconds); a backend that does not
	// answer in time makes the operation fail with a retryable connection_error.
	Timeout time.Duration
	// ClaimHold bounds how long a claimed approval may stay claimed (default 5 minutes): a
	// claim older than that belongs to a call that died (its runner crashed) and the backend
	// ends the request as expired, so it blocks nobody forever and never commits twice. The
	// memory backend dies with its claimers and ignores it.
	ClaimHold time.Duration
	// OnError receives the backend errors the store turns into connection_error answers, or
	// that it cannot answer (Finish, Counts), for the operator's log. nil: dropped.
	OnError func(op string, err error)
}

// Store holds approval requests in its Backend: by default in memory, on the runner that
// measured them; with a shared backend (a PostgreSQL schema), for every runner of a fleet. It
// decides who may see, decide and use a request, counts and audits what happens; the backend
// only keeps rows and changes each one atomically. It is safe for concurrent use; one store
// serves every registry a configuration reload builds.
type Store struct {
	o Options
	b Backend

	mu          sync.Mutex // counts, lastPending and the Audit calls
	counts      map[string]int64
	lastPending int
}

// NewStore makes a store over o.Backend (an empty memory backend when nil).
func NewStore(o Options) *Store {
	if o.TTL <= 0 {
		o.TTL = 15 * time.Minute
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 20
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.ClaimHold <= 0 {
		o.ClaimHold = 5 * time.Minute
	}
	if o.Backend == nil {
		o.Backend = NewMemory(o.Now)
	}
	return &Store{o: o, b: o.Backend, counts: map[string]int64{}}
}

// TTL is how long a request waits for a decision.
func (a *Store) TTL() time.Duration { return a.o.TTL }

// Now is the store's clock (Options.Now), which ages requests: a page that shows a request's
// age reads the same clock.
func (a *Store) Now() time.Time { return a.o.Now() }

// Shared reports whether the store's backend is shared by other runners (Backend.Shared).
func (a *Store) Shared() bool { return a.b.Shared() }

// Counts are a store's figures for metrics.
type Counts struct {
	// Pending are the requests waiting for a decision in the backend: with a shared backend,
	// the fleet's.
	Pending int
	Events  map[string]int64 // by Events, as this store saw them
}

// Counts returns the pending requests and the events so far. When the backend does not
// answer, Pending is the last count it gave.
func (a *Store) Counts() Counts {
	ctx, cancel := a.ctx()
	defer cancel()
	n, err := 0, a.sweep(ctx)
	if err == nil {
		n, err = a.b.CountPending(ctx)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.failed("count", err)
		n = a.lastPending
	}
	a.lastPending = n
	return Counts{Pending: n, Events: maps.Clone(a.counts)}
}

func (a *Store) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), a.o.Timeout)
}

// failed hands err to Options.OnError.
func (a *Store) failed(op string, err error) {
	if a.o.OnError != nil {
		a.o.OnError(op, err)
	}
}

// unavailable is the answer of an operation the backend could not do: retryable, nothing done.
func (a *Store) unavailable(op string, err error) *pgerr.Error {
	a.failed(op, err)
	return &pgerr.Error{Type: pgerr.ErrConnection,
		Message:    "The approval requests cannot be reached right now (the runner's state database does not answer); nothing was run and no approval was made, decided or used",
		Suggestion: "Retry in a few seconds. If it persists, tell the operator that pgtools' state database (setting state) is down; calls that need no approval still work."}
}

// sweep has the backend expire what is past its time and forget what ended a TTL ago, and
// audits the expiries.
func (a *Store) sweep(ctx context.Context) error {
	expired, err := a.b.Sweep(ctx, a.o.TTL, a.o.ClaimHold)
	if err != nil {
		return err
	}
	for _, r := range expired {
		ap := r.request()
		a.event("expired", &ap, nil)
	}
	return nil
}

// event counts and audits what happened to ap.
func (a *Store) event(what string, ap *Request, by *Party) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.counts[what]++
	if a.o.Audit == nil {
		return
	}
	ev := Event{Time: a.o.Now().UTC(), What: what, Request: *ap}
	if by != nil {
		ev.Approver = by.Name
	}
	a.o.Audit(ev)
}

// visibleTo reports whether approver may see and decide ap: it holds the approve scope, may use
// ap's database, and is not the credential that asked.
func visibleTo(approver Party, ap *Request) bool {
	return approver.mayDecide(ap.Database) && approver.credential() != ap.credential
}

// Pending lists the pending requests approver may decide, oldest first; none when the backend
// does not answer (List says so).
func (a *Store) Pending(approver Party) []Request {
	list, _ := a.List(approver)
	return list
}

// List lists the pending requests approver may decide, oldest first, or says that the backend
// does not answer.
func (a *Store) List(approver Party) ([]Request, *pgerr.Error) {
	ctx, cancel := a.ctx()
	defer cancel()
	if err := a.sweep(ctx); err != nil {
		return nil, a.unavailable("list", err)
	}
	recs, err := a.b.Pending(ctx)
	if err != nil {
		return nil, a.unavailable("list", err)
	}
	var out []Request
	for _, r := range recs {
		ap := r.request()
		if ap.Status == Pending && visibleTo(approver, &ap) {
			out = append(out, ap)
		}
	}
	slices.SortFunc(out, func(x, y Request) int { return x.Created.Compare(y.Created) })
	return out, nil
}

// load sweeps and reads request id: ok false when the backend holds none.
func (a *Store) load(ctx context.Context, op, id string) (Request, bool, *pgerr.Error) {
	if err := a.sweep(ctx); err != nil {
		return Request{}, false, a.unavailable(op, err)
	}
	r, ok, err := a.b.Get(ctx, id)
	if err != nil {
		return Request{}, false, a.unavailable(op, err)
	}
	return r.request(), ok, nil
}

// Get returns request id as approver may see it.
func (a *Store) Get(approver Party, id string) (Request, *pgerr.Error) {
	ctx, cancel := a.ctx()
	defer cancel()
	ap, ok, e := a.load(ctx, "get", id)
	if e != nil {
		return Request{}, e
	}
	if !ok || !approver.mayDecide(ap.Database) {
		return Request{}, notFound(id)
	}
	return ap, nil
}

// Decide approves or denies pending request id for approver: another credential than the one
// that asked, holding the approve scope and allowed on the request's database.
func (a *Store) Decide(approver Party, id string, approve bool) (Request, *pgerr.Error) {
	if !approver.Approver {
		if approver.Refusal != nil {
			e := *approver.Refusal
			return Request{}, &e
		}
		return Request{}, pgerr.Errorf(pgerr.ErrNotAllowed, "Ask the operator for a token with the approve scope.",
			"Your token lacks the %q scope that %s needs", "approve", "decide approval requests")
	}
	ctx, cancel := a.ctx()
	defer cancel()
	ap, ok, e := a.load(ctx, "decide", id)
	if e != nil {
		return Request{}, e
	}
	if !ok || !approver.mayDecide(ap.Database) {
		return Request{}, notFound(id)
	}
	if approver.credential() == ap.credential {
		return Request{}, &pgerr.Error{Type: pgerr.ErrNotAllowed,
			Message:    fmt.Sprintf("Approval %s was requested with this credential, and the credential that asks cannot approve", id),
			Suggestion: "A different person must decide it, signed in with their own approver token."}
	}
	return a.decide(ctx, ap, approver, approve)
}

// DecideUnchecked records approver's decision on pending request id, whoever the approver is:
// the caller has checked that it may decide (a client's user deciding its own call's request,
// where the database allows it).
func (a *Store) DecideUnchecked(approver Party, id string, approve bool) (Request, *pgerr.Error) {
	ctx, cancel := a.ctx()
	defer cancel()
	ap, ok, e := a.load(ctx, "decide", id)
	if e != nil {
		return Request{}, e
	}
	if !ok {
		return Request{}, notFound(id)
	}
	return a.decide(ctx, ap, approver, approve)
}

// decide has the backend decide ap if it is still pending there.
func (a *Store) decide(ctx context.Context, ap Request, approver Party, approve bool) (Request, *pgerr.Error) {
	if ap.Status == Pending {
		r, done, err := a.b.Decide(ctx, ap.ID, approver.Name, approve, a.o.TTL)
		if err != nil {
			return Request{}, a.unavailable("decide", err)
		}
		ap = r.request()
		if done {
			if approve {
				a.event("approved", &ap, &approver)
			} else {
				a.event("denied", &ap, &approver)
			}
			return ap, nil
		}
	}
	return ap, &pgerr.Error{Type: pgerr.ErrInvalidArguments,
		Message:    fmt.Sprintf("Approval %s is %s; only a pending request can be decided", ap.ID, ap.Status),
		Suggestion: "List the pending requests with GET /v1/approvals."}
}

func notFound(id string) *pgerr.Error {
	return &pgerr.Error{Type: pgerr.ErrInvalidArguments,
		Message:    fmt.Sprintf("No approval request %s on this runner (it ended and was forgotten, or another runner holds it)", words.Quote(id)),
		Suggestion: "Call again without approval_id: the call is measured again and a new request made."}
}

// Ask records a pending request for call c, which did eff and the rules (Rule.String) matched,
// and returns it as it was made (a copy: an approver may decide it at once).
func (a *Store) Ask(c Call, eff Effect, rules []string) (Request, *pgerr.Error) {
	ctx, cancel := a.ctx()
	defer cancel()
	if err := a.sweep(ctx); err != nil {
		return Request{}, a.unavailable("ask", err)
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	rec := Record{Request: Request{ID: "apr_" + hex.EncodeToString(b[:]), Status: Pending, Principal: c.Party.Name, Database: c.Database,
		Tool: c.Tool, Digest: c.Digest, Arguments: c.Arguments, Effect: eff, Rules: rules}, Credential: c.Party.credential()}
	r, n, err := a.b.Insert(ctx, rec, a.o.TTL, a.o.MaxPending)
	if err != nil {
		return Request{}, a.unavailable("ask", err)
	}
	if n >= a.o.MaxPending {
		return Request{}, &pgerr.Error{Type: pgerr.ErrRateLimited,
			Message:    fmt.Sprintf("%d approval requests of this credential are already waiting; no new one was made and nothing changed", n),
			Suggestion: "Wait for an approver to decide the pending requests (or for them to expire), then call again."}
	}
	ap := r.request()
	a.event("requested", &ap, nil)
	return ap, nil
}

// Claim takes approval id for one run of call c: it must be approved, unexpired, not in use,
// and given for this party, database, tool and arguments. Of several calls claiming it at once,
// through this store or another on the same backend, exactly one gets it. The caller reads the
// claimed request and hands it to Finish, once.
func (a *Store) Claim(c Call, id string) (*Request, *pgerr.Error) {
	ctx, cancel := a.ctx()
	defer cancel()
	ap, ok, e := a.load(ctx, "claim", id)
	if e != nil {
		return nil, e
	}
	if !ok || ap.credential != c.Party.credential() || ap.Principal != c.Party.Name {
		return nil, notFound(id)
	}
	if ap.Database != c.Database || ap.Tool != c.Tool || ap.Digest != c.Digest {
		return nil, &pgerr.Error{Type: pgerr.ErrInvalidArguments,
			Message:    fmt.Sprintf("Approval %s was given for another call: %s on database %s with other arguments; nothing was run", id, ap.Tool, ap.Database),
			Suggestion: "Send exactly the arguments the approval was requested with, or call without approval_id to request approval of this call."}
	}
	if ap.Status == Approved && !ap.inUse {
		var b [16]byte
		_, _ = rand.Read(b[:])
		r, won, err := a.b.Claim(ctx, id, hex.EncodeToString(b[:]))
		if err != nil {
			return nil, a.unavailable("claim", err)
		}
		ap = r.request()
		if won {
			return &ap, nil
		}
	}
	switch {
	case ap.Status == Pending:
		return nil, RequiredError(&ap, "is still waiting for an approver; nothing was run")
	case ap.Status == Denied:
		return nil, &pgerr.Error{Type: pgerr.ErrNotAllowed,
			Message:    fmt.Sprintf("Approval %s was denied by %s; nothing was changed", id, ap.Approver),
			Suggestion: "Do not repeat the call; tell the user it was denied and ask what to do instead."}
	case ap.Status == Approved:
		return nil, &pgerr.Error{Type: pgerr.ErrInvalidArguments,
			Message:    fmt.Sprintf("Approval %s is being used by another call right now; nothing was run", id),
			Suggestion: "An approval runs its call once: wait for that call's answer instead of sending it again."}
	}
	return nil, &pgerr.Error{Type: pgerr.ErrInvalidArguments,
		Message:    fmt.Sprintf("Approval %s is %s and cannot be used again; nothing was run", id, ap.Status),
		Suggestion: "Call again without approval_id to have the call measured again and a new approval requested."}
}

// Finish ends claimed request ap with status (Used or Mismatched, with what the call measured
// instead), or hands it back (Approved) when its call ended before its effect was compared.
// When the backend cannot record it, ap stays claimed there until Options.ClaimHold ends it as
// expired: it is never used twice.
func (a *Store) Finish(ap *Request, status Status, measured *Effect) {
	ctx, cancel := a.ctx()
	defer cancel()
	_, err := a.b.Finish(ctx, ap.ID, ap.claim, status, measured)
	if err != nil {
		a.failed("finish", err)
	}
	ap.inUse, ap.claim = false, ""
	if status == Approved {
		return
	}
	ap.Status, ap.Measured = status, measured
	a.event(string(status), ap, nil)
}

// Own returns request id when p asked for it.
func (a *Store) Own(p Party, id string) (Request, bool) {
	ctx, cancel := a.ctx()
	defer cancel()
	ap, ok, e := a.load(ctx, "get", id)
	if e != nil || !ok || ap.credential != p.credential() || ap.Principal != p.Name {
		return Request{}, false
	}
	return ap, true
}

// RequiredError is the answer of a call that waits for approval of ap (approval_required); state
// says where the request stands and what became of the call.
func RequiredError(ap *Request, state string) *pgerr.Error {
	rules := strings.Join(ap.Rules, "; ")
	e := &pgerr.Error{Type: pgerr.ErrApprovalRequired,
		Message: fmt.Sprintf("This %s call needs a person's approval (%s): it would change %s. Approval request %s %s",
			ap.Tool, rules, ap.Effect.forCaller().describe(), ap.ID, state),
		Suggestion: fmt.Sprintf("Tell the user what waits for approval. Once an approver (another person's token with the approve scope, on the runner's /approvals page or POST /v1/approvals/%s) approves it, "+
			"call %s again with the same arguments plus approval_id: %q, before %s.", ap.ID, ap.Tool, ap.ID, ap.Expires.UTC().Format(time.RFC3339))}
	e.Approval = callerView(ap, nil)
	return e
}

// MismatchError is the answer of a call approved as ap that would now do measured instead
// (approval_mismatch): it was rolled back and the approval is used up.
func MismatchError(ap *Request, measured Effect) *pgerr.Error {
	e := &pgerr.Error{Type: pgerr.ErrApprovalMismatch,
		Message: fmt.Sprintf("Approval %s was given for %s, but the call would now change %s; it was rolled back, nothing changed, and the approval is used up",
			ap.ID, ap.Effect.forCaller().describe(), measured.forCaller().describe()),
		Suggestion: "The data changed since the approval. Call again without approval_id to have the call measured again and a new approval requested."}
	e.Approval = callerView(ap, &measured)
	return e
}

// FromError reads the approval request a failed call's error carries (approval_required,
// approval_mismatch): its id and digest; ok false when it carries none.
func FromError(e *pgerr.Error) (id, digest string, ok bool) {
	if e == nil || len(e.Approval) == 0 {
		return "", "", false
	}
	var ap struct {
		ID     string `json:"id"`
		Digest string `json:"digest"`
	}
	if json.Unmarshal(e.Approval, &ap) != nil || ap.ID == "" {
		return "", "", false
	}
	return ap.ID, ap.Digest, true
}

// callerView is ap as the caller that asked may read it: no approver's arguments echo, tables
// its role cannot read folded into one entry.
func callerView(ap *Request, measured *Effect) json.RawMessage {
	v := struct {
		ID       string    `json:"id"`
		Status   Status    `json:"status"`
		Database string    `json:"database"`
		Tool     string    `json:"tool"`
		Digest   string    `json:"digest"`
		Effect   Effect    `json:"effect"`
		Measured *Effect   `json:"measured,omitempty"`
		Rules    []string  `json:"rules"`
		Expires  time.Time `json:"expiresAt"`
	}{ap.ID, ap.Status, ap.Database, ap.Tool, ap.Digest, ap.Effect.forCaller(), nil, ap.Rules, ap.Expires.UTC()}
	if measured != nil {
		m := measured.forCaller()
		v.Measured = &m
	}
	b, _ := wire.Marshal(v) // as the rest of the error: <, > and & stay readable for a model
	return b
}
