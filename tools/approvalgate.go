package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgtools/pgtools/tools/approval"
	"github.com/pgtools/pgtools/tools/internal/wire"
)

// approvalGate is one write call under approval rules: it decides, from the effect its
// statements measured before COMMIT, whether the call commits, and records what it decided.
type approvalGate struct {
	store   *approval.Store
	rules   []approval.Rule
	call    approval.Call     // who calls, where, with which tool and arguments
	claimed *approval.Request // the approved request approval_id named, claimed for this call
	done    bool              // claimed was finished
}

// newApprovalGate builds the gate of a call of tool by p on db with the validated arguments in,
// of which the call gave those named given, or nil when no rule applies and no approval_id was
// sent. An approval_id is claimed here, before anything runs.
func newApprovalGate(store *approval.Store, p Principal, db *Database, tool string, in toolArgs, given []string) (*approvalGate, *Error) {
	rules := approvalRules(p, db)
	id := in.approvalID()
	if len(rules) == 0 || store == nil {
		if id != "" {
			return nil, &Error{Type: ErrInvalidArguments,
				Message:    "approval_id was sent, but no approval rule applies to this call; nothing was run",
				Suggestion: "Call again without approval_id."}
		}
		return nil, nil
	}
	raw, err := approvalArguments(in, given)
	if err != nil {
		return nil, errorf(ErrInvalidArguments, "Send plain JSON arguments.", "The arguments cannot be encoded: %v", err)
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte(tool), []byte(db.Name), raw} {
		h.Write(part)
		h.Write([]byte{0})
	}
	g := &approvalGate{store: store, rules: rules, call: approval.Call{Party: p.Party(), Database: db.Name, Tool: tool,
		Digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), Arguments: raw}}
	if id != "" {
		ap, e := store.Claim(g.call, id)
		if e != nil {
			return nil, e
		}
		g.claimed = ap
	}
	return g, nil
}

// approvalArguments is a call as an approver reads it and as its digest binds it: each argument
// the call gave (given) but approval_id, as the typed arguments in hold it, keys sorted at every
// level, numbers as written, no HTML escapes. So the same arguments give the same text, and a
// call that differs in any argument another. The typed fields encode as the call wrote them
// (count, nameList, rawValue; an optional field inside an object is left out when absent).
func approvalArguments(in toolArgs, given []string) ([]byte, error) {
	all, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	var fields map[string]any
	if err := wire.Unmarshal(all, &fields); err != nil {
		return nil, err
	}
	shown := make(map[string]any, len(given))
	for _, k := range given {
		if k != "approval_id" {
			shown[k] = fields[k]
		}
	}
	// Map keys sorted, no HTML escapes: one text per set of arguments, as the approver reads it.
	return wire.Marshal(shown)
}

// settle decides a write that did eff and is about to commit: nil commits it; an error rolls it
// back. Without an approval the call a rule matches makes a request (approval_required); with
// one, the effect must be the approved one (approval_mismatch otherwise, and the approval is
// used up).
func (g *approvalGate) settle(eff approval.Effect) *Error {
	if g == nil {
		return nil
	}
	return g.decide(eff, eff, eff, "was made; the call ran in a transaction that was rolled back, and nothing changed")
}

// settleSession decides a statement of a session that did mine, and with it the session's
// kept statements did whole: rows_over judges whole, the other rules mine; a request, and the
// comparison with an approval, carry whole. nil keeps the statement in the session; an error
// rolls it back to its savepoint, and the session stays open.
func (g *approvalGate) settleSession(mine, whole approval.Effect) *Error {
	if g == nil {
		return nil
	}
	return g.decide(mine, whole, whole, "was made for the session's whole effect (its earlier statements with this one); this statement was rolled back to its savepoint, the earlier ones are kept, and the session stays open")
}

// decide is settle and settleSession: rows_over judges rows, the other rules stmt, and asked is
// the effect a request carries and an approval must match.
func (g *approvalGate) decide(stmt, rows, asked approval.Effect, state string) *Error {
	var matched []string
	for _, r := range g.rules {
		judged := stmt
		if r.When == approval.WhenRowsOver {
			judged = rows
		}
		if r.Matches(g.call.Tool, judged) {
			matched = append(matched, r.String())
		}
	}
	eff := asked
	if g.claimed == nil {
		if len(matched) == 0 {
			return nil
		}
		ap, e := g.store.Ask(g.call, eff, matched)
		if e != nil {
			return e
		}
		return approval.RequiredError(&ap, state)
	}
	if !g.claimed.Effect.Same(eff) {
		g.done = true
		g.store.Finish(g.claimed, approval.Mismatched, &eff)
		return approval.MismatchError(g.claimed, eff)
	}
	return nil
}

// committed records that the call committed with its approval (it is used up).
func (g *approvalGate) committed() {
	if g == nil || g.claimed == nil || g.done {
		return
	}
	g.done = true
	g.store.Finish(g.claimed, approval.Used, nil)
}

// release hands a claimed approval back when its call ended before committing or comparing
// (a failed statement, a lost connection): it may be used again until it expires.
func (g *approvalGate) release() {
	if g == nil || g.claimed == nil || g.done {
		return
	}
	g.done = true
	g.store.Finish(g.claimed, approval.Approved, nil)
}

// approvalRules are the rules that apply to p's calls on db: the database's, then p's.
func approvalRules(p Principal, db *Database) []approval.Rule {
	if len(p.RequireApproval) == 0 {
		return db.Policy.RequireApproval
	}
	return append(slices.Clip(db.Policy.RequireApproval), p.RequireApproval...)
}

// Party is p as the approval store knows it, asking for approvals or deciding them: its name
// and credential, whether it holds the approve scope (and, when not, the refusal that says how
// to get it), and the databases it may use.
func (p Principal) Party() approval.Party {
	a := approval.Party{Name: p.Name, Credential: p.credential(), Approver: p.Can("approve"), Databases: p.Databases}
	if !a.Approver {
		a.Refusal = p.lacksScope("approve", "decide approval requests", "")
	}
	return a
}

// execReadings runs pgtools' own fixed SQL followed, in the same round trip, by the table
// writes reading tw (when not "") and the effects reading (when withEffects), and returns them.
func execReadings(ctx context.Context, pc *pgconn.PgConn, sql, tw string, withEffects bool) (before effects, tables []approval.TableRows, err error) {
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
		if tables, err = approval.DecodeTableWrites(results[i].Rows); err != nil {
			return effects{}, nil, err
		}
	}
	return before, tables, nil
}

// effectOf builds the effect of statements whose command tags and schema flags are outs from
// the table rows they wrote.
func effectOf(tables []approval.TableRows, outs ...*writeOutcome) approval.Effect {
	e := approval.Effect{Tables: tables}
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
