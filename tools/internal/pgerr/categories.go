package pgerr

import "net/http"

// Meta is what an error category means to a transport: the HTTP status of a failed call and
// whether the same call, sent again later unchanged, may succeed.
type Meta struct {
	// Status is the HTTP status the API answers a call that failed with the category.
	Status int
	// Retryable reports that repeating the call unchanged may succeed (after a wait), so clients
	// and hosts may retry it on their own. False where a retry cannot help (the call must change)
	// or may apply a write twice (commit_outcome_unknown, internal_error).
	Retryable bool
}

// categories is the one table of every category's metadata; AllErrorTypes lists its keys in
// declaration order, and a test checks both against the constants declared in this package.
var categories = map[ErrorType]Meta{
	ErrConnection:           {http.StatusServiceUnavailable, true},
	ErrAuthentication:       {http.StatusServiceUnavailable, false},
	ErrInvalidTable:         {http.StatusBadRequest, false},
	ErrInvalidColumn:        {http.StatusBadRequest, false},
	ErrSyntax:               {http.StatusBadRequest, false},
	ErrConstraint:           {http.StatusConflict, false},
	ErrPermissionDenied:     {http.StatusForbidden, false},
	ErrTimeout:              {http.StatusGatewayTimeout, true},
	ErrInvalidArguments:     {http.StatusBadRequest, false},
	ErrWriteIntentRequired:  {http.StatusBadRequest, false},
	ErrSessionNotFound:      {http.StatusNotFound, false},
	ErrSessionExpired:       {http.StatusNotFound, false},
	ErrSessionLimitReached:  {http.StatusTooManyRequests, true},
	ErrReadOnlyViolation:    {http.StatusForbidden, false},
	ErrNotAllowed:           {http.StatusForbidden, false},
	ErrConfirmationRequired: {http.StatusBadRequest, false},
	ErrTooManyRows:          {http.StatusConflict, false},
	ErrCommitOutcomeUnknown: {http.StatusInternalServerError, false},
	ErrRateLimited:          {http.StatusTooManyRequests, true},
	ErrTooExpensive:         {http.StatusUnprocessableEntity, false},
	ErrApprovalRequired:     {http.StatusForbidden, false},
	ErrApprovalMismatch:     {http.StatusConflict, false},
	ErrInternal:             {http.StatusInternalServerError, false},
	ErrUnknownTool:          {http.StatusNotFound, false},
}

// AllErrorTypes lists every error category, in the order they are declared.
func AllErrorTypes() []ErrorType {
	return []ErrorType{ErrConnection, ErrAuthentication, ErrInvalidTable, ErrInvalidColumn, ErrSyntax, ErrConstraint,
		ErrPermissionDenied, ErrTimeout, ErrInvalidArguments, ErrWriteIntentRequired, ErrSessionNotFound, ErrSessionExpired,
		ErrSessionLimitReached, ErrReadOnlyViolation, ErrNotAllowed, ErrConfirmationRequired, ErrTooManyRows,
		ErrCommitOutcomeUnknown, ErrRateLimited, ErrTooExpensive, ErrApprovalRequired, ErrApprovalMismatch, ErrInternal, ErrUnknownTool}
}

// MetaOf returns t's metadata. A category without an entry, which a test forbids, answers
// ok false with the metadata of internal_error (500, not retryable): callers log it and fail
// closed rather than guess.
func MetaOf(t ErrorType) (m Meta, ok bool) {
	if m, ok = categories[t]; ok {
		return m, true
	}
	return categories[ErrInternal], false
}
