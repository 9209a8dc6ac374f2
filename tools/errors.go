package tools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/pgtools/pgtools/tools/internal/pgerr"
	"github.com/pgtools/pgtools/tools/internal/wire"
	"github.com/pgtools/pgtools/tools/plan"
	"github.com/pgtools/pgtools/tools/words"
)

// Error is the one shape every failure takes, from every transport (pgerr.Error).
type Error = pgerr.Error

// ErrorType is the category of a failed call (pgerr.ErrorType).
type ErrorType = pgerr.ErrorType

// The error categories of docs/design.md §4, as pgerr defines them.
const (
	ErrApprovalMismatch     = pgerr.ErrApprovalMismatch
	ErrApprovalRequired     = pgerr.ErrApprovalRequired
	ErrAuthentication       = pgerr.ErrAuthentication
	ErrCommitOutcomeUnknown = pgerr.ErrCommitOutcomeUnknown
	ErrConfirmationRequired = pgerr.ErrConfirmationRequired
	ErrConnection           = pgerr.ErrConnection
	ErrConstraint           = pgerr.ErrConstraint
	ErrInternal             = pgerr.ErrInternal
	ErrInvalidArguments     = pgerr.ErrInvalidArguments
	ErrInvalidColumn        = pgerr.ErrInvalidColumn
	ErrInvalidTable         = pgerr.ErrInvalidTable
	ErrNotAllowed           = pgerr.ErrNotAllowed
	ErrPermissionDenied     = pgerr.ErrPermissionDenied
	ErrRateLimited          = pgerr.ErrRateLimited
	ErrReadOnlyViolation    = pgerr.ErrReadOnlyViolation
	ErrSessionExpired       = pgerr.ErrSessionExpired
	ErrSessionLimitReached  = pgerr.ErrSessionLimitReached
	ErrSessionNotFound      = pgerr.ErrSessionNotFound
	ErrSyntax               = pgerr.ErrSyntax
	ErrTimeout              = pgerr.ErrTimeout
	ErrTooManyRows          = pgerr.ErrTooManyRows
	ErrTooExpensive         = pgerr.ErrTooExpensive
	ErrUnknownTool          = pgerr.ErrUnknownTool
	ErrWriteIntentRequired  = pgerr.ErrWriteIntentRequired
)

// ErrorMeta is an error category's HTTP status and retryability (pgerr.Meta).
type ErrorMeta = pgerr.Meta

// ErrorMetaOf returns t's entry in the category table; ok is false for a category without one,
// which then carries internal_error's metadata (pgerr.MetaOf).
func ErrorMetaOf(t ErrorType) (m ErrorMeta, ok bool) { return pgerr.MetaOf(t) }

// AllErrorTypes lists every error category (pgerr.AllErrorTypes).
func AllErrorTypes() []ErrorType { return pgerr.AllErrorTypes() }

// errorf builds an Error of type t with a formatted message and a suggestion.
func errorf(t ErrorType, suggestion, format string, args ...any) *Error {
	return pgerr.Errorf(t, suggestion, format, args...)
}

// DecodeJSON decodes a caller's JSON into v as every caller-facing decoder must (wire.Unmarshal:
// one value, numbers exact, a key named twice in one object refused at any depth). The runner's
// transports read what callers send through it: the approvals API, MCP messages, n8n tasks.
func DecodeJSON(data []byte, v any) error { return wire.Unmarshal(data, v) }

// CheckDuplicateKeys is DuplicateKey of data without decoding it: for a transport that hands
// the bytes on (MCP's go-sdk decodes its own envelope). nil for data without a duplicate key,
// and for data that is not valid JSON (the decoder that reads it says why).
func CheckDuplicateKeys(data []byte) *Error { return DuplicateKey(wire.CheckKeys(data)) }

// DuplicateKey is the answer to JSON that names a key twice in one object (err from
// DecodeJSON), naming the key and where it is; nil when err is anything else.
func DuplicateKey(err error) *Error {
	var dup *wire.DuplicateKeyError
	if !errors.As(err, &dup) {
		return nil
	}
	at := ""
	if len(dup.Path) > 0 {
		at = " in " + words.Quote(strings.Join(dup.Path, "/"))
	}
	return errorf(ErrInvalidArguments, "Send each key once per object; readers disagree on which of two values counts.",
		"Invalid arguments: the key %s appears more than once%s", words.Quote(dup.Key), at)
}

// callContext says what kind of statement failed (pgerr.Context).
type callContext = pgerr.Context

// classify turns any error from running a statement into an *Error (pgerr.Classify).
func classify(ctx context.Context, err error, cc callContext, maskValues bool) *Error {
	return pgerr.Classify(ctx, err, cc, maskValues)
}

// redactValues masks, in a failed call's message and suggestion, every value the caller passed as
// data (params, row, rows, set, operations[].params) wherever PostgreSQL echoed it, whatever the
// SQLSTATE: a param cast to regclass comes back as `relation "…" does not exist` (42P01), one
// passed to current_setting as `unrecognized configuration parameter "…"` (42704). PostgreSQL
// may have read the value as a name first — quotes removed, case folded, split on dots, cut to
// 63 bytes — so a quoted name standing for any of those forms is masked too (valueMasker).
func redactValues(e *Error, args map[string]any) {
	var vals []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			if utf8.RuneCountInString(x) >= minRedactLen {
				vals = append(vals, x)
			}
		case json.Number:
			if len(x) >= minRedactLen {
				vals = append(vals, string(x))
			}
		case []any:
			for _, el := range x {
				walk(el)
			}
		case map[string]any:
			for _, el := range x {
				walk(el)
			}
		}
	}
	walkParams := func(v any) {
		if s, ok := v.(string); ok {
			// params may be a string holding a JSON array: mask its elements too.
			var list []any
			if wire.Unmarshal([]byte(s), &list) == nil {
				walk(list)
			}
		}
		walk(v)
	}
	walkParams(args["params"])
	for _, k := range []string{"row", "rows", "set"} {
		walk(args[k])
	}
	if ops, ok := args["operations"].([]any); ok {
		for _, op := range ops {
			if m, ok := op.(map[string]any); ok {
				walkParams(m["params"])
			}
		}
	}
	if len(vals) == 0 {
		return
	}
	m := newValueMasker(vals)
	e.Message = m.mask(e.Message)
	e.Suggestion = m.mask(e.Suggestion)
	if len(e.Plan) > 0 {
		e.Plan = maskPlan(e.Plan, m)
	}
}

// maskPlan masks the values a refused statement's plan summary echoes (a filter shows its bound
// parameters as literals), field by field; a summary that cannot be read is dropped.
func maskPlan(raw json.RawMessage, m *valueMasker) json.RawMessage {
	var s plan.Summary
	if json.Unmarshal(raw, &s) != nil {
		return nil
	}
	for i := range s.Scans {
		s.Scans[i].Filter = m.mask(s.Scans[i].Filter)
	}
	for i := range s.Warnings {
		s.Warnings[i] = m.mask(s.Warnings[i])
	}
	out, err := json.Marshal(s)
	if err != nil {
		return nil
	}
	return out
}

func withOp(e *Error, op, table string) *Error {
	if e.Operation == "" {
		e.Operation = op
	}
	if e.Table == "" {
		e.Table = table
	}
	return e
}
