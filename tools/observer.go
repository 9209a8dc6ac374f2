package tools

import "time"

// CallEvent is one finished tool call as metrics see it: what ran where, how it ended and how
// long it took. It never holds arguments, values, SQL or the principal.
type CallEvent struct {
	// Tool is the tool's wire name, or "" when the name was not a known tool.
	Tool string
	// Database is the configured database the call was routed to, or "" when it never got that
	// far (bad arguments, a database the principal may not use, an unknown name).
	Database string
	// ErrorType is the failure's category, or "" for a success.
	ErrorType ErrorType
	// Duration is the time spent in Registry.Call, validation included.
	Duration time.Duration
	// Rows is the result's rowCount (rows returned), 0 when it has none.
	Rows int
	// Truncated reports a result cut at its row limit or byte cap.
	Truncated bool
}

// Observer receives one event per Registry.Call, on the caller's goroutine, after the call has
// finished. Implementations must be safe for concurrent use and cheap: they run on every call.
type Observer interface {
	ObserveCall(ev CallEvent)
}

func (r *Registry) observe(tool string, db *Database, routed bool, res Result, err *Error, started time.Time) {
	if r.observer == nil {
		return
	}
	ev := CallEvent{Tool: tool, Duration: time.Since(started)}
	if db != nil && routed {
		ev.Database = db.Name
	}
	if err != nil {
		ev.ErrorType = err.Type
	}
	if res != nil {
		sum := res.Summary()
		if sum.Rows != nil {
			ev.Rows = *sum.Rows
		}
		ev.Truncated = sum.Truncated
	}
	r.observer.ObserveCall(ev)
}
