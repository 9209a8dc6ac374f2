package n8n_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pgtools/pgtools/runner/n8n"
	"github.com/pgtools/pgtools/tools/toolstest"
)

// TestPanicIsAnInternalErrorOverTheBroker: a panicking tool answers runner:taskerror with an
// internal_error naming the task id, and the same connection runs the next task.
func TestPanicIsAnInternalErrorOverTheBroker(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *n8n.Options) { o.Caller = toolstest.PanicOn{Caller: o.Caller, Tool: "describe_schema"} })
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
