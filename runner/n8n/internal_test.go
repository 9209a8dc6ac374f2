package n8n

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pgtools/pgtools/tools"
)

func TestParseSettings(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, settings string
		tool, args     string // want; args compared as JSON text
		problem        string // want an invalid_arguments error whose message contains this
	}{
		{"object args", `{"tool":"select_query","args":{"table":"t","limit":10}}`, "select_query", `{"table":"t","limit":10}`, ""},
		{"string args", `{"tool":"select_query","args":"{\"table\":\"t\"}"}`, "select_query", `{"table":"t"}`, ""},
		{"empty string args", `{"tool":"describe_schema","args":""}`, "describe_schema", `{}`, ""},
		{"null args", `{"tool":"describe_schema","args":null}`, "describe_schema", `{}`, ""},
		{"no args", `{"tool":"describe_schema"}`, "describe_schema", `{}`, ""},
		{"database merged", `{"tool":"select_query","args":{"table":"t"},"database":"sales"}`, "select_query", `{"database":"sales","table":"t"}`, ""},
		{"same database twice", `{"tool":"select_query","args":{"table":"t","database":"sales"},"database":"sales"}`, "select_query", `{"database":"sales","table":"t"}`, ""},
		{"empty database ignored", `{"tool":"select_query","args":{"table":"t"},"database":""}`, "select_query", `{"table":"t"}`, ""},
		{"exact numbers kept", `{"tool":"select_query","args":{"params":[12345678901234567890,1.50]},"database":"d"}`, "select_query", `{"database":"d","params":[12345678901234567890,1.50]}`, ""},
		{"no settings", `null`, "", "", "no settings"},
		{"settings not an object", `["select_query"]`, "", "", "must be a JSON object"},
		{"no tool", `{"args":{}}`, "", "", `lack "tool"`},
		{"tool not a string", `{"tool":5}`, "", "", `"tool" must be a string, not a number`},
		{"unknown key", `{"tool":"select_query","argz":{}}`, "", "", `unknown key "argz"`},
		{"args an array", `{"tool":"select_query","args":[1]}`, "", "", `"args" must be a JSON object`},
		{"args a string of an array", `{"tool":"select_query","args":"[1]"}`, "", "", `"args" must be a JSON object`},
		{"args a broken string", `{"tool":"select_query","args":"{\"table\":"}`, "", "", `"args" must be a JSON object`},
		{"two databases", `{"tool":"select_query","args":{"database":"a"},"database":"b"}`, "", "", "another database"},
		{"args too large", `{"tool":"select_query","args":{"where":"` + strings.Repeat("x", 200) + `"}}`, "", "", "larger than the 100-byte limit"},
		{"response cap and text result", `{"tool":"select_query","args":{},"max_response_bytes":2048,"text_result":true}`, "select_query", `{}`, ""},
		{"response cap null", `{"tool":"select_query","max_response_bytes":null}`, "select_query", `{}`, ""},
		{"plan budget", `{"tool":"select_query","max_estimated_cost":1500.5,"max_estimated_rows":100}`, "select_query", `{}`, ""},
		{"plan budget null", `{"tool":"select_query","max_estimated_cost":null,"max_estimated_rows":null}`, "select_query", `{}`, ""},
		{"plan cost zero", `{"tool":"select_query","max_estimated_cost":0}`, "", "", `"max_estimated_cost" must be a positive number`},
		{"plan cost a string", `{"tool":"select_query","max_estimated_cost":"lots"}`, "", "", `"max_estimated_cost" must be a positive number`},
		{"plan rows fractional", `{"tool":"select_query","max_estimated_rows":1.5}`, "", "", `"max_estimated_rows" must be a positive whole number`},
		{"plan rows negative", `{"tool":"select_query","max_estimated_rows":-3}`, "", "", `"max_estimated_rows" must be a positive whole number`},
		{"response cap zero", `{"tool":"select_query","max_response_bytes":0}`, "", "", `"max_response_bytes" must be a positive whole number`},
		{"response cap negative", `{"tool":"select_query","max_response_bytes":-1}`, "", "", `"max_response_bytes" must be a positive whole number`},
		{"response cap fractional", `{"tool":"select_query","max_response_bytes":1.5}`, "", "", `"max_response_bytes" must be a positive whole number`},
		{"response cap a string", `{"tool":"select_query","max_response_bytes":"16k"}`, "", "", `"max_response_bytes" must be a positive whole number`},
		{"text result not a boolean", `{"tool":"select_query","text_result":"yes"}`, "", "", `"text_result"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tc, terr := parseSettings(json.RawMessage(c.settings), 100)
			if c.problem != "" {
				if terr == nil || terr.Type != tools.ErrInvalidArguments || !strings.Contains(terr.Message, c.problem) || terr.Suggestion == "" {
					t.Fatalf("got %v, want invalid_arguments mentioning %q", terr, c.problem)
				}
				return
			}
			if terr != nil {
				t.Fatalf("unexpected error %v", terr)
			}
			if tc.tool != c.tool || string(tc.args) != c.args {
				t.Fatalf("got %s %s, want %s %s", tc.tool, tc.args, c.tool, c.args)
			}
		})
	}
}

func TestParseSettingsAnswerOptions(t *testing.T) {
	t.Parallel()
	tc, terr := parseSettings(json.RawMessage(`{"tool":"select_query","max_response_bytes":2048,"text_result":true}`), 100)
	if terr != nil || tc.maxBytes != 2048 || !tc.text {
		t.Fatalf("got %+v, %v", tc, terr)
	}
	tc, terr = parseSettings(json.RawMessage(`{"tool":"select_query","max_estimated_cost":1500.5,"max_estimated_rows":100}`), 100)
	if terr != nil || tc.maxCost != 1500.5 || tc.maxRows != 100 {
		t.Fatalf("plan budget: got %+v, %v", tc, terr)
	}
	tc, terr = parseSettings(json.RawMessage(`{"tool":"select_query"}`), 100)
	if terr != nil || tc.maxBytes != 0 || tc.text || tc.maxCost != 0 || tc.maxRows != 0 {
		t.Fatalf("defaults: got %+v, %v", tc, terr)
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	minD, maxD := 100*time.Millisecond, 2*time.Second
	for n := 1; n <= 40; n++ {
		want := maxD
		if n <= 5 {
			want = minD << (n - 1) // 100, 200, 400, 800, 1600 ms
		}
		for range 50 {
			if d := backoff(n, minD, maxD); d < want/2 || d > want {
				t.Fatalf("attempt %d waits %v, want within [%v, %v]", n, d, want/2, want)
			}
		}
	}
}

func TestNewDerivesEndpoints(t *testing.T) {
	t.Parallel()
	base := Options{AuthToken: "x", Caller: &tools.Registry{}, Principal: tools.Principal{Name: "n8n-broker"}}
	cases := []struct{ url, auth, ws, problem string }{
		{"http://127.0.0.1:5679", "http://127.0.0.1:5679/runners/auth", "ws://127.0.0.1:5679/runners/_ws?id=", ""},
		{"http://127.0.0.1:5679/", "http://127.0.0.1:5679/runners/auth", "ws://127.0.0.1:5679/runners/_ws?id=", ""},
		{"https://n8n.internal:5679/custom/", "https://n8n.internal:5679/custom/auth", "wss://n8n.internal:5679/custom/_ws?id=", ""},
		{"ws://n8n:5679/runners", "http://n8n:5679/runners/auth", "ws://n8n:5679/runners/_ws?id=", ""},
		{"", "", "", "is not a URL"},
		{"127.0.0.1:5679", "", "", "is not a URL"},
		{"http://user:hunter2 @n8n:5679", "", "", "is not a URL"},
		{"ftp://n8n:5679", "", "", "scheme must be http or https"},
		{"http://user:hunter2@n8n:5679", "", "", "no credentials"},
		{"http://n8n:5679/?token=abc", "", "", "no credentials, query or fragment"},
	}
	for _, c := range cases {
		o := base
		o.URL = c.url
		cl, err := New(o)
		if c.problem != "" {
			if err == nil || !strings.Contains(err.Error(), c.problem) || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("%q: got %v, want an error about %q (without the password)", c.url, err, c.problem)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.url, err)
			continue
		}
		if cl.authURL != c.auth || cl.wsURL != c.ws+cl.id {
			t.Errorf("%q: auth %s, ws %s", c.url, cl.authURL, cl.wsURL)
		}
	}
	if _, err := New(Options{URL: "http://n8n:5679", Caller: &tools.Registry{}, Principal: tools.Principal{Name: "p"}}); err == nil || !strings.Contains(err.Error(), "N8N_RUNNERS_AUTH_TOKEN") {
		t.Errorf("no auth token: got %v", err)
	}
}

// TestParseSettingsRefusesDuplicateKeys: a key named twice in the task's settings or in its
// args (an object or a string holding one), at any depth, is invalid_arguments naming the key,
// before withDatabase would re-encode args through a map and keep only one of the two.
func TestParseSettingsRefusesDuplicateKeys(t *testing.T) {
	t.Parallel()
	for _, settings := range []string{
		`{"tool":"select_query","tool":"delete_data"}`,
		`{"tool":"delete_data","args":{"table":"t","where":"id = 1","where":"true","autocommit":true}}`,
		`{"tool":"delete_data","args":"{\"table\":\"t\",\"where\":\"id = 1\",\"where\":\"true\",\"autocommit\":true}"}`,
		`{"tool":"insert_data","args":{"table":"t","rows":[{"id":1,"id":2}]}}`,
	} {
		_, terr := parseSettings(json.RawMessage(settings), 1000)
		if terr == nil || terr.Type != tools.ErrInvalidArguments || !strings.Contains(terr.Message, "appears more than once") {
			t.Errorf("%s: %v", settings, terr)
		}
	}
}
