package n8n_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/n8n"
)

// TestSubjectSetting: a client with ActAs runs a task naming a subject as
// "<broker principal>:<subject>" with the claims {"sub", "via"} plus the fixed ones; a client
// without it refuses such a task with not_allowed and runs nothing.
func TestSubjectSetting(t *testing.T) {
	t.Parallel()
	claimsSQL := map[string]any{"tool": "execute_sql", "subject": "user-42",
		"args": map[string]any{"sql": "SELECT current_setting('request.jwt.claims', true) AS c"}}

	t.Run("without act_as", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, nil)
		rn := f.broker.NextRunner(t, 5*time.Second)
		ans := rn.Answer(t, rn.StartTask(t, map[string]any{"tool": "insert_data", "subject": "user-42",
			"args": map[string]any{"table": "orders", "row": map[string]any{"id": 9}, "autocommit": true}}), 5*time.Second)
		if ans.Type != "runner:taskerror" || withoutTime(t, ans.Error)["errorType"] != "not_allowed" {
			t.Fatalf("got %s, want not_allowed", ans.Raw)
		}
		if n := f.db.QueryInt(t, `SELECT count(*) FROM orders WHERE id = 9`); n != 0 {
			t.Fatal("the refused task ran")
		}
	})

	t.Run("with act_as", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, func(o *n8n.Options) { o.ActAs = &auth.ActAs{Claims: map[string]any{"app": "n8n"}} })
		rn := f.broker.NextRunner(t, 5*time.Second)
		ans := rn.Answer(t, rn.StartTask(t, claimsSQL), 5*time.Second)
		if ans.Type != "runner:taskdone" {
			t.Fatalf("got %s", ans.Raw)
		}
		rows, _ := withoutTime(t, ans.Result())["data"].([]any)
		if len(rows) != 1 {
			t.Fatalf("got %s", ans.Raw)
		}
		var claims map[string]any
		_ = json.Unmarshal([]byte(rows[0].(map[string]any)["c"].(string)), &claims)
		if claims["sub"] != "user-42" || claims["via"] != "n8n-broker" || claims["app"] != "n8n" {
			t.Errorf("claims %v", claims)
		}
		if logs := f.logs.String(); !strings.Contains(logs, `"principal":"n8n-broker:user-42"`) {
			t.Errorf("the task's log line does not name the subject's principal:\n%s", logs)
		}
	})
}
