package tools

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/schemas"

	"github.com/pgtools/pgtools/tools/internal/wire"
	"github.com/pgtools/pgtools/tools/words"
)

// knownErrorTypes are the categories a call may answer with (docs/design.md §4).
var knownErrorTypes = []ErrorType{ErrConnection, ErrAuthentication, ErrInvalidTable, ErrInvalidColumn, ErrSyntax,
	ErrConstraint, ErrPermissionDenied, ErrTimeout, ErrInvalidArguments, ErrWriteIntentRequired, ErrSessionNotFound,
	ErrSessionExpired, ErrSessionLimitReached, ErrReadOnlyViolation, ErrNotAllowed, ErrConfirmationRequired,
	ErrTooManyRows, ErrCommitOutcomeUnknown, ErrRateLimited, ErrInternal, ErrUnknownTool}

// maxErrorText bounds what one error may hand a model, message and suggestion together.
const maxErrorText = 4096

// FuzzCall feeds arbitrary bytes as the arguments of every tool to Registry.Call. The registry's
// database refuses connections, so what passes validation fails fast as connection_error and no
// PostgreSQL is needed. Properties: no panic; every failure is an *Error of a known category with
// a suggestion and a bounded text; an invalid_arguments error never carries more than a
// words.MaxEchoRunes-character prefix of any string the caller sent.
//
// CI runs it for a bounded time (make fuzz); go test runs the seeds.
func FuzzCall(f *testing.F) {
	reg := closedPortRegistry(f)
	names := schemas.ToolNames()
	seeds := []string{
		``, `{}`, `null`, `[]`, `"x"`, `{"table":"orders"}`, `{"table":"orders","where":"id = $1","params":[1]}`,
		`{"table":"orders","params":"[1, \"a\"]"}`, `{"sql":"select 1","mode":"write","autocommit":true}`,
		`{"table":"items","rows":[{"sku":"a"}],"on_conflict":{"columns":"sku","action":"update"}}`,
		`{"table":"orders","set":{"status":"x"},"where":"id = 1","session_id":"00000000-0000-4000-8000-000000000000"}`,
		`{"action":"savepoint","name":"sp1","session_id":"00000000-0000-4000-8000-000000000000"}`,
		`{"operations":[{"sql":"select $1","params":["\u0000"]}]}`, `{"table":"orders","where":"\u0000"}`,
		`{"table":"orders","limit":1e400,"offset":-1}`, `{"` + strings.Repeat("k", 300) + `":1}`,
		`{"table":"` + strings.Repeat("t", 300) + `","database":"` + strings.Repeat("d", 300) + `"}`,
	}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s))
	}
	f.Fuzz(func(t *testing.T, which uint8, args []byte) {
		tool := names[int(which)%len(names)]
		res, _, e := reg.Call(context.Background(), testPrincipal, tool, args)
		if e == nil {
			if res == nil {
				t.Fatal("neither a result nor an error")
			}
			return
		}
		if !slices.Contains(knownErrorTypes, e.Type) || e.Message == "" || e.Suggestion == "" {
			t.Fatalf("%s: malformed error %+v", tool, e)
		}
		text := e.Message + "\n" + e.Suggestion
		if len(text) > maxErrorText {
			t.Fatalf("%s: %d bytes of error text: %.200s…", tool, len(text), text)
		}
		if e.Type != ErrInvalidArguments {
			return
		}
		var decoded any
		if wire.Unmarshal(args, &decoded) != nil {
			return
		}
		schema, _ := schemas.Tool(tool)
		known := string(schema) + strings.Join(reg.tools[tool].props, ", ")
		forEachString(decoded, func(s string) {
			// Any window of the value one character longer than the echo limit must not appear,
			// unless the tool's own schema holds it (a property list, an enum).
			if _, long := words.Clip(s, words.MaxEchoRunes); !long {
				return
			}
			window, _ := words.Clip(s, words.MaxEchoRunes+1)
			if strings.Contains(text, window) && !strings.Contains(known, window) {
				t.Fatalf("%s: invalid_arguments echoes more than %d characters of %.80q: %.300s", tool, words.MaxEchoRunes, s, text)
			}
		})
	})
}

// forEachString calls fn with every string in a decoded JSON value, object keys included.
func forEachString(v any, fn func(string)) {
	switch x := v.(type) {
	case string:
		fn(x)
	case []any:
		for _, el := range x {
			forEachString(el, fn)
		}
	case map[string]any:
		for k, el := range x {
			fn(k)
			forEachString(el, fn)
		}
	}
}

// FuzzParamList feeds arbitrary text as the string form of params (what n8n's $fromAI sends):
// no panic, a bounded *Error or a list that encodes without a panic.
func FuzzParamList(f *testing.F) {
	for _, s := range []string{``, `[]`, `[1, "a", null, true, [1, [2]], {"k": "v"}]`, `["\u0000"]`, `[1e400]`, `[`, `"x"`, `[` + strings.Repeat("1,", 100) + `1]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		params, e := paramList(s)
		if e != nil {
			if e.Type != ErrInvalidArguments || e.Suggestion == "" || len(e.Message)+len(e.Suggestion) > maxErrorText {
				t.Fatalf("malformed error %+v", e)
			}
			return
		}
		if len(params) > maxBindParams {
			t.Fatalf("%d params accepted", len(params))
		}
		_, _ = wire.EncodeParams(params, nil)
	})
}
