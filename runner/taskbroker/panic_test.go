package taskbroker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgtools/pgtools/runner/taskbroker"
	"github.com/pgtools/pgtools/tools"
)

// panicOn is a Caller that panics, as a bug would, in every call of one tool.
type panicOn struct {
	taskbroker.Caller
	tool string
}

func (c panicOn) Call(ctx context.Context, p tools.Principal, tool string, args []byte) (tools.Result, *tools.Error) {
	if tool == c.tool {
		var m map[string]int
		m["boom"]++ // a runtime error: assignment to entry in nil map
	}
	return c.Caller.Call(ctx, p, tool, args)
}

// TestPanicIsAnInternalErrorOverTheBroker: a panicking tool answers runner:taskerror with an
// internal_error naming the task id, and the same connection runs the next task.
func TestPanicIsAnInternalErrorOverTheBroker(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *taskbroker.Options) { o.Caller = panicOn{Caller: o.Caller, tool: "describe_schema"} })
	rn := f.broker.NextRunner(t, 5*time.Second)
	for i := range 2 {
		taskID := rn.StartTask(t, map[string]any{"tool": "describe_schema", "args": map[string]any{"table": "SECRET-ARG-VALUE"}})
		ans := rn.Answer(t, taskID, 5*time.Second)
		e := withoutTime(t, ans.Error)
		if ans.Type != "runner:taskerror" || e["errorType"] != "internal_error" ||
			!strings.Contains(e["error"].(string), taskID) || !strings.Contains(e["suggestion"].(string), taskID) {
			t.Fatalf("task %d answered %s, want an internal_error naming task %s", i, ans.Raw, taskID)
		}
		taskID = rn.StartTask(t, map[string]any{"tool": "select_query", "args": map[string]any{"table": "orders"}})
		if ans := rn.Answer(t, taskID, 5*time.Second); ans.Type != "runner:taskdone" || withoutTime(t, ans.Result())["rowCount"] != float64(5) {
			t.Fatalf("task after the panic answered %s", ans.Raw)
		}
	}
	select {
	case <-rn.Closed():
		t.Fatal("the runner's connection closed")
	default:
	}
	logs := f.logs.String()
	if !strings.Contains(logs, `"message":"tool call panicked"`) || strings.Contains(logs, "SECRET-ARG-VALUE") {
		t.Fatalf("want a panic line without argument values:\n%s", logs)
	}
}
