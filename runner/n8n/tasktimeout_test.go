package n8n_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pgtools/pgtools/runner/n8n"
)

// TestTaskEndsBeforeN8nTimesItOut: a call longer than n8n's task timeout (N8N_RUNNERS_TASK_TIMEOUT,
// 60 s by default from n8n 3 on) is cancelled on the server by pgtools, which answers with a
// timeout naming both settings before n8n would cancel the task with an error the model cannot
// act on. Every tool's call runs under the same bound, so one slow read stands for them all.
func TestTaskEndsBeforeN8nTimesItOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *n8n.Options) { o.TaskTimeout = 2 * time.Second })
	rn := f.broker.NextRunner(t, 5*time.Second)

	taskID := f.startSleeping(t, rn, "select pg_sleep(20)")
	ans := rn.Answer(t, taskID, 10*time.Second)
	if ans.Type != "runner:taskerror" {
		t.Fatalf("got %s", ans.Raw)
	}
	var e struct {
		Success    *bool  `json:"success"`
		ErrorType  string `json:"errorType"`
		Error      string `json:"error"`
		Suggestion string `json:"suggestion"`
	}
	if err := json.Unmarshal(ans.Error, &e); err != nil {
		t.Fatal(err)
	}
	if e.Success == nil || *e.Success || e.ErrorType != "timeout" || !strings.Contains(e.Error, "task timeout (2 s)") ||
		!strings.Contains(e.Suggestion, "N8N_RUNNERS_TASK_TIMEOUT") || !strings.Contains(e.Suggestion, "n8n.task_timeout_ms") {
		t.Fatalf("answer %s: want a timeout naming n8n's task timeout, N8N_RUNNERS_TASK_TIMEOUT and n8n.task_timeout_ms", ans.Error)
	}
	f.waitSleeps(t, 0, time.Second) // the statement no longer runs on the server
	waitOpenOffers(t, rn, 3)
}

// TestTaskTimeoutChangesWhileRunning: SetTaskTimeout (a configuration reload of
// n8n.task_timeout_ms) bounds the tasks that start after it, on a client already connected.
func TestTaskTimeoutChangesWhileRunning(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *n8n.Options) { o.TaskTimeout = time.Minute })
	rn := f.broker.NextRunner(t, 5*time.Second)
	f.client.SetTaskTimeout(2 * time.Second)
	taskID := f.startSleeping(t, rn, "select pg_sleep(20)")
	if ans := rn.Answer(t, taskID, 10*time.Second); ans.Type != "runner:taskerror" || !strings.Contains(string(ans.Error), "task timeout (2 s)") {
		t.Fatalf("a task after SetTaskTimeout(2s): %s", ans.Raw)
	}
}
