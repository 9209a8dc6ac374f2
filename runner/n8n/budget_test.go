package n8n_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestTaskResponseCapAndTextResult: the settings max_response_bytes (lowers the byte cap of the
// call's rows, like the HTTP header X-PgTools-Max-Response-Bytes) and text_result (the answer as
// a string holding its JSON text, so n8n's JavaScript cannot round big numbers in it).
func TestTaskResponseCapAndTextResult(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.db.Exec(t, `CREATE TABLE wide (id int PRIMARY KEY, pad text, doc jsonb);
		INSERT INTO wide SELECT i, repeat('x', 90), '{"big": 12345678901234567890}' FROM generate_series(1, 200) i;
		GRANT SELECT ON wide TO "`+f.role+`"`)
	rn := f.broker.NextRunner(t, 5*time.Second)
	run := func(t *testing.T, settings string) (typ string, answer []byte) {
		t.Helper()
		ans := rn.Answer(t, rn.StartTask(t, json.RawMessage(settings)), 5*time.Second)
		if ans.Type == "runner:taskdone" {
			return ans.Type, ans.Result()
		}
		return ans.Type, ans.Error
	}
	object := func(t *testing.T, raw []byte) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("not a JSON object: %s", raw)
		}
		return m
	}

	t.Run("max_response_bytes cuts the rows", func(t *testing.T) {
		_, full := run(t, `{"tool":"select_query","args":{"table":"wide","columns":"id,pad"}}`)
		typ, capped := run(t, `{"tool":"select_query","args":{"table":"wide","columns":"id,pad"},"max_response_bytes":2048}`)
		all, cut := object(t, full), object(t, capped)
		if typ != "runner:taskdone" || cut["truncated"] != true || cut["rowCount"].(float64) >= all["rowCount"].(float64) || cut["rowCount"].(float64) == 0 {
			t.Fatalf("capped at 2048 bytes: %s", capped)
		}
		if hint, _ := cut["hint"].(string); !strings.Contains(hint, "2048-byte response cap") {
			t.Fatalf("hint does not name the cap: %q", hint)
		}
		if len(capped) > 2048+1024 {
			t.Fatalf("%d bytes with a 2048-byte cap on the rows", len(capped))
		}
	})

	for _, bad := range []string{`0`, `-1`, `1.5`, `"16k"`, `true`} {
		t.Run("max_response_bytes "+bad, func(t *testing.T) {
			typ, raw := run(t, `{"tool":"select_query","args":{"table":"wide"},"max_response_bytes":`+bad+`}`)
			e := object(t, raw)
			if typ != "runner:taskerror" || e["errorType"] != "invalid_arguments" || !strings.Contains(e["error"].(string), `"max_response_bytes"`) || e["suggestion"] == "" {
				t.Fatalf("got %s %s", typ, raw)
			}
		})
	}

	t.Run("max_estimated_rows refuses a read planned over it", func(t *testing.T) {
		typ, raw := run(t, `{"tool":"select_query","args":{"table":"wide"},"max_estimated_rows":10}`)
		e := object(t, raw)
		if typ != "runner:taskerror" || e["errorType"] != "too_expensive" || e["plan"] == nil {
			t.Fatalf("got %s %s", typ, raw)
		}
		if typ, _ := run(t, `{"tool":"select_query","args":{"table":"wide","where":"id = 1"},"max_estimated_rows":10,"max_estimated_cost":1000}`); typ != "runner:taskdone" {
			t.Fatalf("a primary-key read under the budget: %s", typ)
		}
	})

	t.Run("text_result keeps big numbers exact", func(t *testing.T) {
		typ, raw := run(t, `{"tool":"select_query","args":{"table":"wide","columns":"doc","limit":1},"text_result":true}`)
		var text string
		if typ != "runner:taskdone" || json.Unmarshal(raw, &text) != nil {
			t.Fatalf("want the answer as a JSON string, got %s %s", typ, raw)
		}
		if !strings.Contains(text, `{"big": 12345678901234567890}`) || object(t, []byte(text))["success"] != true {
			t.Fatalf("answer text %s", text)
		}
		// Without text_result the answer is the object itself.
		if _, raw := run(t, `{"tool":"select_query","args":{"table":"wide","columns":"doc","limit":1}}`); !strings.HasPrefix(string(raw), "{") {
			t.Fatalf("without text_result: %s", raw)
		}
	})

	t.Run("text_result for an error answer", func(t *testing.T) {
		typ, raw := run(t, `{"tool":"select_query","args":{"table":"wide","columns":"nope"},"text_result":true}`)
		var text string
		if typ != "runner:taskerror" || json.Unmarshal(raw, &text) != nil {
			t.Fatalf("want the error as a JSON string, got %s %s", typ, raw)
		}
		if e := object(t, []byte(text)); e["errorType"] != "invalid_column" || e["suggestion"] == "" {
			t.Fatalf("error text %s", text)
		}
	})
}
