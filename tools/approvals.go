package tools

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgtools/pgtools/tools/internal/wire"
	"github.com/pgtools/pgtools/tools/words"
)

// ApprovalStatus is where an approval request stands.
type ApprovalStatus string

// The states of an approval request. pending → approved or denied (by an approver) or expired;
// approved → used (its call committed), mismatched (its call would have done something else)
// or expired. Only approved is ever usable, and only once.
const (
	ApprovalPending    ApprovalStatus = "pending"
	ApprovalApproved   ApprovalStatus = "approved"
	ApprovalDenied     ApprovalStatus = "denied"
	ApprovalExpired    ApprovalStatus = "expired"
	ApprovalUsed       ApprovalStatus = "used"
	ApprovalMismatched ApprovalStatus = "mismatched"
)

// ApprovalEvents are the events Approvals counts, in the order metrics list them.
var ApprovalEvents = []string{"requested", "approved", "denied", "expired", "used", "mismatched"}

// Approval is one approval request: a call a rule stopped, bound to its principal, database,
// tool, arguments (by digest) and measured effect.
type Approval struct {
	ID        string          `json:"id"`
	Status    ApprovalStatus  `json:"status"`
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
}

// ApprovalOptions configure an approval store. Zero values take the defaults.
type ApprovalOptions struct {
	// TTL is how long a request waits for a decision, and how long an approval may then be
	// used (default 15 minutes).
	TTL time.Duration
	// MaxPending bounds the pending requests of one credential (default 20); past it a call
	// that needs approval is refused rate_limited.
	MaxPending int
	// Auditor receives each request, decision, expiry and outcome. nil: nobody.
	Auditor Auditor
	// Now is the clock (tests). nil: time.Now.
	Now func() time.Time
}

// Approvals holds approval requests in memory, on the runner that measured them. It is safe for
// concurrent use; one store serves every registry a configuration reload builds.
type Approvals struct {
	mu     sync.Mutex
	o      ApprovalOptions
	byID   map[string]*Approval
	counts map[string]int64
}

// NewApprovals makes an empty store.
func NewApprovals(o ApprovalOptions) *Approvals {
	if o.TTL <= 0 {
		o.TTL = 15 * time.Minute
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 20
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Approvals{o: o, byID: map[string]*Approval{}, counts: map[string]int64{}}
}

// TTL is how long a request waits for a decision.
func (a *Approvals) TTL() time.Duration { return a.o.TTL }

// Now is the store's clock (ApprovalOptions.Now), which ages and expires requests: a page that
// shows a request's age reads the same clock.
func (a *Approvals) Now() time.Time { return a.o.Now() }

// ApprovalCounts are the store's figures for metrics.
type ApprovalCounts struct {
	Pending int
	Events  map[string]int64 // by ApprovalEvents
}

// Counts returns the pending requests and the events so far.
func (a *Approvals) Counts() ApprovalCounts {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sweep()
	n := 0
	for _, ap := range a.byID {
		if ap.Status == ApprovalPending {
			n++
		}
	}
	return ApprovalCounts{Pending: n, Events: maps.Clone(a.counts)}
}

// sweep expires what is past its time and forgets what ended a TTL ago. Called with mu held.
func (a *Approvals) sweep() {
	now := a.o.Now()
	for id, ap := range a.byID {
		switch {
		case (ap.Status == ApprovalPending || ap.Status == ApprovalApproved && !ap.inUse) && !now.Before(ap.Expires):
			ap.Status = ApprovalExpired
			a.event("expired", ap, nil)
		case ap.Status != ApprovalPending && ap.Status != ApprovalApproved && now.Sub(ap.Expires) > a.o.TTL:
			delete(a.byID, id)
		}
	}
}

// event counts and audits what happened to ap.
func (a *Approvals) event(what string, ap *Approval, by *Principal) {
	a.counts[what]++
	if a.o.Auditor == nil {
		return
	}
	ev := AuditEvent{Time: a.o.Now().UTC(), Principal: ap.Principal, Tool: ap.Tool, Database: ap.Database,
		Outcome: "approval_" + what, ApprovalID: ap.ID, Digest: ap.Digest}
	if by != nil {
		ev.Approver = by.Name
	}
	total := int(ap.Effect.Total)
	ev.AffectedRows = &total
	a.o.Auditor.Audit(ev)
}

// visibleTo reports whether approver may see and decide ap: it holds the approve scope, may use
// ap's database, and is not the credential that asked.
func visibleTo(approver Principal, ap *Approval) bool {
	return approver.Can("approve") && approver.mayUse(ap.Database) && approver.credential() != ap.credential
}

// Pending lists the pending requests approver may decide, oldest first.
func (a *Approvals) Pending(approver Principal) []Approval {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sweep()
	var out []Approval
	for _, ap := range a.byID {
		if ap.Status == ApprovalPending && visibleTo(approver, ap) {
			out = append(out, *ap)
		}
	}
	slices.SortFunc(out, func(x, y Approval) int { return x.Created.Compare(y.Created) })
	return out
}

// Get returns request id as approver may see it.
func (a *Approvals) Get(approver Principal, id string) (Approval, *Error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sweep()
	ap, ok := a.byID[id]
	if !ok || !approver.Can("approve") || !approver.mayUse(ap.Database) {
		return Approval{}, approvalNotFound(id)
	}
	return *ap, nil
}

// Decide approves or denies pending request id for approver: another credential than the one
// that asked, holding the approve scope and allowed on the request's database.
func (a *Approvals) Decide(approver Principal, id string, approve bool) (Approval, *Error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sweep()
	if !approver.Can("approve") {
		return Approval{}, approver.lacksScope("approve", "decide approval requests", "")
	}
	ap, ok := a.byID[id]
	if !ok || !approver.mayUse(ap.Database) {
		return Approval{}, approvalNotFound(id)
	}
	if approver.credential() == ap.credential {
		return Approval{}, &Error{Type: ErrNotAllowed,
			Message:    fmt.Sprintf("Approval %s was requested with this credential, and the credential that asks cannot approve", id),
			Suggestion: "A different person must decide it, signed in with their own approver token."}
	}
	return a.decideLocked(ap, approver, approve)
}

// decide records approver's decision on pending request id, whoever the approver is: the
// callers check that it may decide.
func (a *Approvals) decide(id string, approver Principal, approve bool) (Approval, *Error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sweep()
	ap, ok := a.byID[id]
	if !ok {
		return Approval{}, approvalNotFound(id)
	}
	return a.decideLocked(ap, approver, approve)
}

// decideLocked decides ap, with mu held.
func (a *Approvals) decideLocked(ap *Approval, approver Principal, approve bool) (Approval, *Error) {
	id := ap.ID
	if ap.Status != ApprovalPending {
		return *ap, &Error{Type: ErrInvalidArguments,
			Message:    fmt.Sprintf("Approval %s is %s; only a pending request can be decided", id, ap.Status),
			Suggestion: "List the pending requests with GET /v1/approvals."}
	}
	now := a.o.Now()
	ap.Approver, ap.Decided = approver.Name, &now
	if approve {
		ap.Status, ap.Expires = ApprovalApproved, now.Add(a.o.TTL)
		a.event("approved", ap, &approver)
	} else {
		ap.Status = ApprovalDenied
		a.event("denied", ap, &approver)
	}
	return *ap, nil
}

func approvalNotFound(id string) *Error {
	return &Error{Type: ErrInvalidArguments,
		Message:    fmt.Sprintf("No approval request %s on this runner (it ended and was forgotten, or another runner holds it)", words.Quote(id)),
		Suggestion: "Call again without approval_id: the call is measured again and a new request made."}
}

// request records a pending request for a call g stopped, and returns it as it was made (a copy:
// an approver may decide it as soon as mu is released).
func (a *Approvals) request(g *approvalGate, eff Effect, rules []string) (Approval, *Error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sweep()
	cred := g.p.credential()
	n := 0
	for _, ap := range a.byID {
		if ap.Status == ApprovalPending && ap.credential == cred {
			n++
		}
	}
	if n >= a.o.MaxPending {
		return Approval{}, &Error{Type: ErrRateLimited,
			Message:    fmt.Sprintf("%d approval requests of this credential are already waiting; no new one was made and nothing changed", n),
			Suggestion: "Wait for an approver to decide the pending requests (or for them to expire), then call again."}
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	now := a.o.Now()
	ap := &Approval{ID: "apr_" + hex.EncodeToString(b[:]), Status: ApprovalPending, Principal: g.p.Name, Database: g.db, Tool: g.tool,
		Digest: g.digest, Arguments: g.args, Effect: eff, Rules: rules, Created: now, Expires: now.Add(a.o.TTL), credential: cred}
	a.byID[ap.ID] = ap
	a.event("requested", ap, nil)
	return *ap, nil
}

// claim takes approval id for one call of g: it must be approved, unexpired, not in use, and
// given for this principal, database, tool and arguments.
func (a *Approvals) claim(g *approvalGate, id string) (*Approval, *Error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sweep()
	ap, ok := a.byID[id]
	if !ok || ap.credential != g.p.credential() || ap.Principal != g.p.Name {
		return nil, approvalNotFound(id)
	}
	if ap.Database != g.db || ap.Tool != g.tool || ap.Digest != g.digest {
		return nil, &Error{Type: ErrInvalidArguments,
			Message:    fmt.Sprintf("Approval %s was given for another call: %s on database %s with other arguments; nothing was run", id, ap.Tool, ap.Database),
			Suggestion: "Send exactly the arguments the approval was requested with, or call without approval_id to request approval of this call."}
	}
	switch {
	case ap.Status == ApprovalPending:
		return nil, approvalRequired(ap, "is still waiting for an approver; nothing was run")
	case ap.Status == ApprovalDenied:
		return nil, &Error{Type: ErrNotAllowed,
			Message:    fmt.Sprintf("Approval %s was denied by %s; nothing was changed", id, ap.Approver),
			Suggestion: "Do not repeat the call; tell the user it was denied and ask what to do instead."}
	case ap.Status == ApprovalApproved && !ap.inUse:
		ap.inUse = true
		return ap, nil
	case ap.Status == ApprovalApproved:
		return nil, &Error{Type: ErrInvalidArguments,
			Message:    fmt.Sprintf("Approval %s is being used by another call right now; nothing was run", id),
			Suggestion: "An approval runs its call once: wait for that call's answer instead of sending it again."}
	}
	return nil, &Error{Type: ErrInvalidArguments,
		Message:    fmt.Sprintf("Approval %s is %s and cannot be used again; nothing was run", id, ap.Status),
		Suggestion: "Call again without approval_id to have the call measured again and a new approval requested."}
}

// finish ends claimed request ap with status (used or mismatched), or hands it back (approved)
// when its call ended before its effect was compared.
func (a *Approvals) finish(ap *Approval, status ApprovalStatus, measured *Effect) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ap.inUse = false
	if status == ApprovalApproved {
		return
	}
	ap.Status, ap.Measured = status, measured
	a.event(string(status), ap, nil)
}

// approvalGate is one write call under approval rules: it decides, from the effect its
// statements measured before COMMIT, whether the call commits, and records what it decided.
type approvalGate struct {
	store   *Approvals
	rules   []ApprovalRule
	p       Principal
	db      string
	tool    string
	digest  string
	args    json.RawMessage
	claimed *Approval // the approved request approval_id named, claimed for this call
	done    bool      // claimed was finished
}

// newApprovalGate builds the gate of a call of tool by p on db with the validated arguments m,
// or nil when no rule applies and no approval_id was sent. An approval_id is claimed here,
// before anything runs.
func newApprovalGate(store *Approvals, p Principal, db *Database, tool string, m map[string]any) (*approvalGate, *Error) {
	rules := approvalRules(p, db)
	id, _ := m["approval_id"].(string)
	if len(rules) == 0 || store == nil {
		if id != "" {
			return nil, &Error{Type: ErrInvalidArguments,
				Message:    "approval_id was sent, but no approval rule applies to this call; nothing was run",
				Suggestion: "Call again without approval_id."}
		}
		return nil, nil
	}
	args := make(map[string]any, len(m))
	for k, v := range m {
		if k != "approval_id" {
			args[k] = v
		}
	}
	// Map keys sorted, no HTML escapes: one text per set of arguments, as the approver reads it.
	raw, err := wire.Marshal(args)
	if err != nil {
		return nil, errorf(ErrInvalidArguments, "Send plain JSON arguments.", "The arguments cannot be encoded: %v", err)
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte(tool), []byte(db.Name), raw} {
		h.Write(part)
		h.Write([]byte{0})
	}
	g := &approvalGate{store: store, rules: rules, p: p, db: db.Name, tool: tool, digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), args: raw}
	if id != "" {
		ap, e := store.claim(g, id)
		if e != nil {
			return nil, e
		}
		g.claimed = ap
	}
	return g, nil
}

// settle decides a write that did eff and is about to commit: nil commits it; an error rolls it
// back. Without an approval the call a rule matches makes a request (approval_required); with
// one, the effect must be the approved one (approval_mismatch otherwise, and the approval is
// used up).
func (g *approvalGate) settle(eff Effect) *Error {
	if g == nil {
		return nil
	}
	var matched []string
	for _, r := range g.rules {
		if r.matches(g.tool, eff) {
			matched = append(matched, r.String())
		}
	}
	if g.claimed == nil {
		if len(matched) == 0 {
			return nil
		}
		ap, e := g.store.request(g, eff, matched)
		if e != nil {
			return e
		}
		return approvalRequired(&ap, "was made; the call ran in a transaction that was rolled back, and nothing changed")
	}
	if !g.claimed.Effect.same(eff) {
		g.done = true
		g.store.finish(g.claimed, ApprovalMismatched, &eff)
		e := &Error{Type: ErrApprovalMismatch,
			Message: fmt.Sprintf("Approval %s was given for %s, but the call would now change %s; it was rolled back, nothing changed, and the approval is used up",
				g.claimed.ID, g.claimed.Effect.forCaller().describe(), eff.forCaller().describe()),
			Suggestion: "The data changed since the approval. Call again without approval_id to have the call measured again and a new approval requested."}
		e.Approval = callerView(g.claimed, &eff)
		return e
	}
	return nil
}

// committed records that the call committed with its approval (it is used up).
func (g *approvalGate) committed() {
	if g == nil || g.claimed == nil || g.done {
		return
	}
	g.done = true
	g.store.finish(g.claimed, ApprovalUsed, nil)
}

// release hands a claimed approval back when its call ended before committing or comparing
// (a failed statement, a lost connection): it may be used again until it expires.
func (g *approvalGate) release() {
	if g == nil || g.claimed == nil || g.done {
		return
	}
	g.done = true
	g.store.finish(g.claimed, ApprovalApproved, nil)
}

// ApprovalOf reads the approval request a failed call's error carries (approval_required,
// approval_mismatch): its id and digest; ok false when it carries none.
func ApprovalOf(e *Error) (id, digest string, ok bool) {
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

// approvalRequired is the answer of a call that waits for approval of ap.
func approvalRequired(ap *Approval, state string) *Error {
	rules := strings.Join(ap.Rules, "; ")
	e := &Error{Type: ErrApprovalRequired,
		Message: fmt.Sprintf("This %s call needs a person's approval (%s): it would change %s. Approval request %s %s",
			ap.Tool, rules, ap.Effect.forCaller().describe(), ap.ID, state),
		Suggestion: fmt.Sprintf("Tell the user what waits for approval. Once an approver (another person's token with the approve scope, on the runner's /approvals page or POST /v1/approvals/%s) approves it, "+
			"call %s again with the same arguments plus approval_id: %q, before %s.", ap.ID, ap.Tool, ap.ID, ap.Expires.UTC().Format(time.RFC3339))}
	e.Approval = callerView(ap, nil)
	return e
}

// callerView is ap as the caller that asked may read it: no approver's arguments echo, tables
// its role cannot read folded into one entry.
func callerView(ap *Approval, measured *Effect) json.RawMessage {
	v := struct {
		ID       string         `json:"id"`
		Status   ApprovalStatus `json:"status"`
		Database string         `json:"database"`
		Tool     string         `json:"tool"`
		Digest   string         `json:"digest"`
		Effect   Effect         `json:"effect"`
		Measured *Effect        `json:"measured,omitempty"`
		Rules    []string       `json:"rules"`
		Expires  time.Time      `json:"expiresAt"`
	}{ap.ID, ap.Status, ap.Database, ap.Tool, ap.Digest, ap.Effect.forCaller(), nil, ap.Rules, ap.Expires.UTC()}
	if measured != nil {
		m := measured.forCaller()
		v.Measured = &m
	}
	b, _ := wire.Marshal(v) // as the rest of the error: <, > and & stay readable for a model
	return b
}

// tableWritesSQL reads the rows each table got inserted, updated or deleted as the backend counts
// them (a partition's rows count for its root), and whether the role holds a privilege on it.
// The counters are read for every table first and the rest only for those with rows, so it
// costs little more than one scan of pg_class. Its first row is a marker carrying track_counts:
// without it the counters stay zero and the effect cannot be measured. One statement, so it
// joins a pipeline or a simple-protocol string as one result.
const tableWritesSQL = `SELECT '', '', 0::int8, pg_catalog.current_setting('track_counts')::bool
 UNION ALL (SELECT n.nspname::text, r.relname::text, sum(w.n)::int8,
  pg_catalog.has_table_privilege(r.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
 FROM (SELECT c.oid, pg_catalog.pg_stat_get_xact_tuples_inserted(c.oid) + pg_catalog.pg_stat_get_xact_tuples_updated(c.oid)
    + pg_catalog.pg_stat_get_xact_tuples_deleted(c.oid) AS n
   FROM pg_catalog.pg_class c WHERE c.relkind IN ('r', 'm') AND c.relnamespace <> 'pg_catalog'::pg_catalog.regnamespace
    AND c.relnamespace IS DISTINCT FROM pg_catalog.to_regnamespace('information_schema')) w
 JOIN pg_catalog.pg_class r ON r.oid = coalesce(pg_catalog.pg_partition_root(w.oid), w.oid)
 JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace
 WHERE w.n > 0
 GROUP BY 1, 2, r.oid ORDER BY 1, 2)`

// tableWritesStmtName names tableWritesSQL prepared on a connection (once: it is planned like
// a small statement, and reading it on every write under rules should not pay for that).
const tableWritesStmtName = "pgtools_table_writes"

// tableWritesText is what reads tableWritesSQL in a simple-protocol string on pc: an EXECUTE of
// the statement prepared once per connection where named statements are allowed
// (Policy.PreparesStatements; the reset never deallocates it and agents cannot), else the SQL.
// Called outside a transaction or before its first statement fails it.
func tableWritesText(ctx context.Context, pc *pgconn.PgConn, named bool) string {
	if !named {
		return tableWritesSQL
	}
	data := pc.CustomData()
	if data[tableWritesStmtName] != true {
		if _, err := pc.Prepare(ctx, tableWritesStmtName, tableWritesSQL, nil); err != nil {
			return tableWritesSQL
		}
		data[tableWritesStmtName] = true
	}
	return "EXECUTE " + tableWritesStmtName
}

// execReadings runs pgtools' own fixed SQL followed, in the same round trip, by the table
// writes reading tw (when not "") and the effects reading (when withEffects), and returns them.
func execReadings(ctx context.Context, pc *pgconn.PgConn, sql, tw string, withEffects bool) (before effects, tables []TableRows, err error) {
	if tw != "" {
		sql += "; " + tw
	}
	if withEffects {
		sql += "; " + effectsSQL
	}
	results, err := pc.Exec(ctx, sql).ReadAll()
	if err != nil {
		return effects{}, nil, err
	}
	i := len(results)
	if withEffects {
		if i--; i < 0 {
			return effects{}, nil, fmt.Errorf("reading the transaction's effects: no result")
		}
		if before, err = effectsOf(results[i].Rows); err != nil {
			return effects{}, nil, err
		}
	}
	if tw != "" {
		if i--; i < 0 {
			return effects{}, nil, fmt.Errorf("the table writes reading answered no result")
		}
		if tables, err = tableWritesOf(results[i].Rows); err != nil {
			return effects{}, nil, err
		}
	}
	return before, tables, nil
}

// readTableWrites reads the table writes on pc, inside the open transaction, with tw
// (tableWritesText).
func readTableWrites(ctx context.Context, pc *pgconn.PgConn, tw string) ([]TableRows, error) {
	res, err := pc.Exec(ctx, tw).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(res) != 1 {
		return nil, fmt.Errorf("the table writes reading answered %d results", len(res))
	}
	return tableWritesOf(res[0].Rows)
}

// tableWritesOf decodes the rows of tableWritesSQL.
func tableWritesOf(rows [][][]byte) ([]TableRows, error) {
	marked, counting := false, false
	out := make([]TableRows, 0, len(rows))
	for _, row := range rows {
		if len(row) != 4 {
			return nil, fmt.Errorf("the table writes reading has %d columns", len(row))
		}
		if len(row[0]) == 0 && len(row[1]) == 0 { // the marker: no table has an empty name
			marked, counting = true, string(row[3]) == "t"
			continue
		}
		n, err := strconv.ParseInt(string(row[2]), 10, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, TableRows{Schema: string(row[0]), Name: string(row[1]), Rows: n, hidden: string(row[3]) != "t"})
	}
	if !marked {
		return nil, fmt.Errorf("the table writes reading has no marker row")
	}
	if !counting {
		return nil, &Error{Type: ErrNotAllowed,
			Message:    "Approval rules apply to this call, but track_counts is off on the server, so its effect cannot be measured; nothing was changed",
			Suggestion: "Ask the operator to turn track_counts on (the default): approval rules count rows with it."}
	}
	return out, nil
}

// subTables is after minus before, per table, keeping the tables that changed.
func subTables(after, before []TableRows) []TableRows {
	prev := map[[2]string]int64{}
	for _, t := range before {
		prev[[2]string{t.Schema, t.Name}] = t.Rows
	}
	var out []TableRows
	for _, t := range after {
		t.Rows -= prev[[2]string{t.Schema, t.Name}]
		if t.Rows > 0 {
			out = append(out, t)
		}
	}
	return out
}

// effectOf builds the effect of statements whose command tags and schema flags are outs from
// the table rows they wrote.
func effectOf(tables []TableRows, outs ...*writeOutcome) Effect {
	e := Effect{Tables: tables}
	for _, t := range tables {
		e.Total += t.Rows
	}
	for _, o := range outs {
		if o == nil {
			continue
		}
		e.Commands = append(e.Commands, o.tag)
		e.DDL = e.DDL || o.ddl
		e.Destructive = e.Destructive || isDestructive(o.tag)
	}
	return e
}

// Approvals is the registry's approval store (Options.Approvals, or the one it made).
func (r *Registry) Approvals() *Approvals { return r.approvals }

// ClientMayApprove reports whether the user of p's MCP client may decide p's pending request id
// itself (Policy.ApprovalByClient on the request's database).
func (r *Registry) ClientMayApprove(p Principal, id string) bool {
	ap, ok := r.approvals.own(p, id)
	if !ok {
		return false
	}
	db, ok := r.dbs[ap.Database]
	return ok && db.Policy.ApprovalByClient && ap.Status == ApprovalPending
}

// DecideByClient records the decision of the user of p's MCP client on p's own pending request
// id, where the request's database allows it (ClientMayApprove). The approver is recorded as
// "client-user:" and p's name: the person behind the client, as the client reported it.
func (r *Registry) DecideByClient(p Principal, id string, approve bool) (Approval, *Error) {
	if !r.ClientMayApprove(p, id) {
		return Approval{}, &Error{Type: ErrNotAllowed,
			Message:    fmt.Sprintf("Approval request %s cannot be decided by this client: it is not pending, or its database does not let clients approve", words.Quote(id)),
			Suggestion: "An approver must decide it: another person's token with the approve scope, on the runner's /approvals page or POST /v1/approvals/{id}."}
	}
	return r.approvals.decide(id, Principal{Name: "client-user:" + p.Name}, approve)
}

// own returns p's request id.
func (a *Approvals) own(p Principal, id string) (Approval, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sweep()
	ap, ok := a.byID[id]
	if !ok || ap.credential != p.credential() || ap.Principal != p.Name {
		return Approval{}, false
	}
	return *ap, true
}
