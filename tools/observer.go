package tools

import "time"

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
