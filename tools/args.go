package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/pgtools/pgtools/tools/internal/ident"
	"github.com/pgtools/pgtools/tools/internal/wire"
	"github.com/pgtools/pgtools/tools/words"
)

// This file holds each tool's arguments as a typed struct. Call parses a call's JSON once into
// the value the schema validates; once it has passed, encoding/json decodes the same JSON into the
// tool's struct (numbers as json.Number), so handlers read fields rather than probing a map, and
// a value the schema lets through but Go cannot hold (limit 1e30) is an invalid_arguments answer
// instead of a silent default. From then on the struct is the only carrier of the call's
// arguments: routing, the gates, the approval gate, the audit log and previews read it through
// toolArgs, the handler through its own type.

// toolArgs is what the pipeline reads of a call's typed arguments. Every tool's argument struct
// implements it, mostly through what it embeds: target (or databaseArg) for where it runs,
// readOnlyArgs or writeArgs for whether it writes, overridden where that depends on the call
// (executeArgs, txArgs). defineTool requires it of the handler's argument type, so a tool whose
// arguments lack one of these rules does not compile.
//
// The argument type is the one place that says whether a tool writes: the gates, the approval
// gate, the tool list and config validation (ApprovableTools) all ask it, and NewRegistry
// refuses a tool whose schema says otherwise (readOnly, approval_id).
type toolArgs interface {
	// route is where the call runs: the database it names ("" for the default, or for the
	// tool's own) and the session it runs in ("" for none).
	route() target
	// access is whether the tool's calls write: the same for every value of the type.
	access() access
	// writes reports whether this call changes data (read when access is writesWhen or
	// controlsSessions): it needs the write scope, a writable database and, where the gate
	// asks for it, stated intent.
	writes() bool
	// audited reports whether this call is a write attempt the audit log records (read like
	// writes).
	audited() bool
	// intent is what a write states about committing: autocommit: true, dry_run: true.
	intent() (autocommit, dryRun bool)
	// approvalID is the approved request the call claims, "" for none.
	approvalID() string
}

// access is whether a tool's calls write, as its argument type declares. Its zero value is no
// answer, which NewRegistry refuses and the gates treat as a write (fail closed).
type access int

const (
	accessUnset      access = iota // no answer: refused by checkToolTable
	readsOnly                      // no call writes
	writesAlways                   // every call writes
	writesWhen                     // a call writes when its writes says so
	controlsSessions               // pg_tx: a call writes when its writes says so (a read-write begin), but commits no writes of its own: its session's statements are judged one by one
)

// judged reports whether approval rules (policy.require_approval) judge the tool's calls: those
// of a tool that commits writes of its own.
func (k access) judged() bool { return k == writesAlways || k == writesWhen }

func (k access) String() string {
	switch k {
	case readsOnly:
		return "it never writes"
	case writesAlways:
		return "every call writes"
	case writesWhen:
		return "some calls write"
	case controlsSessions:
		return "it controls sessions"
	}
	return "nothing about writing"
}

// target is where a call runs: the database it names and the session session_id names.
type target struct {
	Database  string `json:"database"`
	SessionID string `json:"session_id"`
}

func (t target) route() target { return t }

// databaseArg is the routing part of a tool whose calls never run in a session.
type databaseArg struct {
	Database string `json:"database"`
}

func (d databaseArg) route() target { return target{Database: d.Database} }

// readOnlyArgs is embedded by the arguments of a tool whose calls never write.
type readOnlyArgs struct{}

func (readOnlyArgs) access() access                    { return readsOnly }
func (readOnlyArgs) writes() bool                      { return false }
func (readOnlyArgs) audited() bool                     { return false }
func (readOnlyArgs) intent() (autocommit, dryRun bool) { return false, false }
func (readOnlyArgs) approvalID() string                { return "" }

// writeArgs is embedded by the arguments of a tool whose every call writes: the intent it
// states and the approval it claims. An argument the tool's schema does not take stays zero
// (insert_data has no dry_run; pg_transaction states no intent).
type writeArgs struct {
	Autocommit bool   `json:"autocommit"`
	DryRun     bool   `json:"dry_run"`
	ApprovalID string `json:"approval_id"`
}

func (writeArgs) access() access                      { return writesAlways }
func (writeArgs) writes() bool                        { return true }
func (writeArgs) audited() bool                       { return true }
func (w writeArgs) intent() (autocommit, dryRun bool) { return w.Autocommit, w.DryRun }
func (w writeArgs) approvalID() string                { return w.ApprovalID }

type selectArgs struct {
	target
	readOnlyArgs
	Format  string   `json:"format"`
	Table   string   `json:"table"`
	Columns nameList `json:"columns"`
	Where   string   `json:"where"`
	Params  rawValue `json:"params"`
	OrderBy string   `json:"order_by"`
	Limit   count    `json:"limit"`
	Offset  count    `json:"offset"`
	// PageToken is checked and merged into the other arguments by Registry.decodeCall, before
	// validation; what it held is the request's pager.
	PageToken string `json:"page_token"`
}

// pageArgs are the arguments a page token of the call carries, by name (page.Spec.Args
// normalizes them; an absent one is nil or "").
func (a *selectArgs) pageArgs() map[string]any {
	return map[string]any{"database": a.Database, "table": a.Table, "columns": a.Columns, "where": a.Where,
		"params": a.Params, "order_by": a.OrderBy, "limit": a.Limit.arg(), "format": a.Format}
}

type describeArgs struct {
	databaseArg
	readOnlyArgs
	Table  string `json:"table"`
	Schema string `json:"schema"`
	Search string `json:"search"`
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
	Limit  count  `json:"limit"`
	// PageToken is checked and merged into the other arguments by Registry.decodeCall, like
	// selectArgs'.
	PageToken string `json:"page_token"`
}

// pageArgs are the arguments a page token of the call carries, by name (describePages).
func (a *describeArgs) pageArgs() map[string]any {
	return map[string]any{"database": a.Database, "table": a.Table, "schema": a.Schema, "search": a.Search,
		"kind": a.Kind, "limit": a.Limit.arg(), "detail": a.Detail}
}

// executeArgs are execute_sql's: a call writes in mode "write".
type executeArgs struct {
	target
	writeArgs
	Format             string   `json:"format"`
	SQL                string   `json:"sql"`
	Params             rawValue `json:"params"`
	Mode               string   `json:"mode"`
	ConfirmDestructive bool     `json:"confirm_destructive"`
}

func (executeArgs) access() access  { return writesWhen }
func (a executeArgs) writes() bool  { return a.Mode == "write" }
func (a executeArgs) audited() bool { return a.writes() }

type insertArgs struct {
	target
	writeArgs
	Format     string           `json:"format"`
	Table      string           `json:"table"`
	Row        map[string]any   `json:"row"`
	Rows       []map[string]any `json:"rows"`
	Returning  nameList         `json:"returning"`
	OnConflict *conflictArgs    `json:"on_conflict"`
}

// conflictArgs is insert_data's on_conflict. An optional field left out stays out when the
// arguments are encoded again (approvalArguments).
type conflictArgs struct {
	Columns       nameList `json:"columns"`
	Action        string   `json:"action"`
	UpdateColumns nameList `json:"update_columns,omitzero"`
}

// changeArgs are update_data's and delete_data's (delete has no set).
type changeArgs struct {
	target
	writeArgs
	Format          string         `json:"format"`
	Table           string         `json:"table"`
	Set             map[string]any `json:"set"`
	Where           string         `json:"where"`
	Params          rawValue       `json:"params"`
	Returning       nameList       `json:"returning"`
	MaxAffectedRows count          `json:"max_affected_rows"`
}

// txArgs are pg_tx's. A read-write begin writes (it needs the write scope and a writable
// database); commit and rollback are audited; session_id names the session the call runs in
// only for the actions on an open session.
type txArgs struct {
	target
	Action         string `json:"action"`
	Name           string `json:"name"`
	IsolationLevel string `json:"isolation_level"`
	ReadOnly       bool   `json:"read_only"`
}

func (a txArgs) route() target {
	switch a.Action {
	case "commit", "rollback", "savepoint", "release", "rollback_to":
		return a.target
	}
	return target{Database: a.Database}
}

func (txArgs) access() access                    { return controlsSessions }
func (a txArgs) writes() bool                    { return a.Action == "begin" && !a.ReadOnly }
func (a txArgs) audited() bool                   { return a.Action == "commit" || a.Action == "rollback" }
func (txArgs) intent() (autocommit, dryRun bool) { return false, false }
func (txArgs) approvalID() string                { return "" }

// batchArgs are pg_transaction's, which never runs in a session.
type batchArgs struct {
	databaseArg
	writeArgs
	Format     string `json:"format"`
	Action     string `json:"action"`
	Operations []struct {
		SQL    string   `json:"sql"`
		Params rawValue `json:"params,omitzero"`
	} `json:"operations"`
}

// reservedArgs are the arguments pgtools adds to a custom tool beside its parameters (customArgs'
// fields and writeArgs').
var reservedArgs = []string{"session_id", "autocommit", "dry_run", "format", "page_token", "approval_id"}

// customArgs are an operator-defined tool's arguments: its declared parameters, as given (an
// absent one is bound its default), and those pgtools adds (reservedArgs) as fields.
type customArgs struct {
	target
	Format    string         `json:"format"`
	PageToken string         `json:"page_token"`
	Params    map[string]any `json:"-"`
}

// customReadArgs and customWriteArgs are the arguments of an operator-defined tool of mode read
// and of mode write (customArgsFor).
type (
	customReadArgs struct {
		customArgs
		readOnlyArgs
	}
	customWriteArgs struct {
		customArgs
		writeArgs
	}
)

// customArgsFor returns the constructor of the arguments of an operator-defined tool of mode:
// the one place that says whether such a tool writes.
func customArgsFor(mode string) func() toolArgs {
	if mode == "write" {
		return func() toolArgs { return &customWriteArgs{} }
	}
	return func() toolArgs { return &customReadArgs{} }
}

// UnmarshalJSON reads a call: the reserved arguments into their fields, the rest as parameters.
func (a *customReadArgs) UnmarshalJSON(b []byte) error { return a.decode(b, nil) }

// UnmarshalJSON reads a call: the reserved arguments into their fields, the rest as parameters.
func (a *customWriteArgs) UnmarshalJSON(b []byte) error { return a.decode(b, &a.writeArgs) }

// MarshalJSON writes the arguments as one object, parameters and reserved arguments side by side
// as the call gave them (approvalArguments).
func (a customWriteArgs) MarshalJSON() ([]byte, error) { return json.Marshal(a.fields(&a.writeArgs)) }

// decode fills a (and w, for a write tool) from a call's JSON object b. It adds to what a holds
// already, so that a call may be read argument by argument (uncheckedArgs).
func (a *customArgs) decode(b []byte, w *writeArgs) error {
	if err := json.Unmarshal(b, a); err != nil { // the fields of target and customArgs
		return err
	}
	if w != nil {
		if err := json.Unmarshal(b, w); err != nil {
			return err
		}
	}
	if err := wire.Unmarshal(b, &a.Params); err != nil {
		return err
	}
	for _, k := range reservedArgs {
		delete(a.Params, k)
	}
	return nil
}

// fields is the call's arguments by name: the parameters and the reserved arguments.
func (a *customArgs) fields(w *writeArgs) map[string]any {
	m := make(map[string]any, len(a.Params)+6)
	for k, v := range a.Params {
		m[k] = v
	}
	m["session_id"], m["format"], m["page_token"] = a.SessionID, a.Format, a.PageToken
	if w != nil {
		m["autocommit"], m["dry_run"], m["approval_id"] = w.Autocommit, w.DryRun, w.ApprovalID
	}
	return m
}

// pageArgs are the arguments a page token of the call carries, by name.
func (a *customArgs) pageArgs() map[string]any {
	m := make(map[string]any, len(a.Params)+1)
	for k, v := range a.Params {
		m[k] = v
	}
	if a.Format != "" {
		m["format"] = a.Format
	}
	return m
}

// argsError is the answer to a validated call whose value Go cannot hold; args, the same call
// as a map, names the argument.
func argsError(err error, args map[string]any) *Error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return errorf(ErrInvalidArguments, "Fix the named argument and call again.", "Invalid arguments: %s: %s", strings.ReplaceAll(te.Field, ".", "/"), plainTypeError(te))
	}
	var ce *countError
	if errors.As(err, &ce) {
		name := "a number"
		for k, v := range args {
			if n, ok := v.(json.Number); ok && string(n) == ce.raw {
				name = k
			}
		}
		return errorf(ErrInvalidArguments, "Give a whole number that is not too large, e.g. 100.", "Invalid arguments: %s: %s", name, ce.Error())
	}
	return errorf(ErrInvalidArguments, "Check the arguments against the tool's schema.", "Invalid arguments: they do not fit the tool's argument types")
}

func plainTypeError(te *json.UnmarshalTypeError) string {
	return "must be " + map[string]string{"string": "a string", "bool": "true or false", "map[string]interface {}": "an object",
		"[]map[string]interface {}": "an array of objects"}[te.Type.String()]
}

// count is an optional whole number: the schema's integer, which JSON may write as 100, 100.0 or
// 1e2. It is exact (never through float64) and refuses what does not fit an int64.
type count struct {
	n   int64
	raw json.Number // as the call wrote it; "" when absent
}

type countError struct{ raw, text string }

func (e *countError) Error() string { return e.text }

// UnmarshalJSON reads a JSON number; null is an absent count.
func (c *count) UnmarshalJSON(b []byte) error {
	*c = count{}
	if string(b) == "null" {
		return nil
	}
	if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
		var v any
		_ = wire.Unmarshal(b, &v)
		return &countError{fmt.Sprint(v), fmt.Sprintf("%s is not a number", words.Quote(fmt.Sprint(v)))}
	}
	raw := string(b) // a JSON number literal, as encoding/json scanned it
	if i, err := strconv.ParseInt(raw, 10, 64); err == nil {
		c.n, c.raw = i, json.Number(raw)
		return nil
	}
	// 1e2 and 100.0 are whole numbers too; read them exactly, never through float64.
	f, _, err := big.ParseFloat(raw, 10, 256, big.ToNearestEven)
	if err != nil || !f.IsInt() {
		return &countError{raw, fmt.Sprintf("%s is not a whole number", words.Quote(raw))}
	}
	i, acc := f.Int64()
	if acc != big.Exact {
		return &countError{raw, fmt.Sprintf("%s is too large", words.Quote(raw))}
	}
	c.n, c.raw = i, json.Number(raw)
	return nil
}

// MarshalJSON writes the number as the call wrote it; null when absent.
func (c count) MarshalJSON() ([]byte, error) {
	if c.raw == "" {
		return []byte("null"), nil
	}
	return []byte(c.raw), nil
}

// arg is the count as a decoded call holds it: the number as written, or nil when absent.
func (c count) arg() any {
	if c.raw == "" {
		return nil
	}
	return c.raw
}

// or returns the number, or def when the argument was absent.
func (c count) or(def int64) int64 {
	if c.raw == "" {
		return def
	}
	return c.n
}

// nameList is a list of names given as a JSON array or one comma-separated string, kept as
// decoded; nil when absent.
type nameList any

// listNames returns the names of l (nil when absent or empty).
func listNames(l nameList) []string { return ident.List(l) }

// rawValue is an argument kept as decoded JSON (numbers as json.Number), nil when absent:
// params, which is an array or a string holding one.
type rawValue any
