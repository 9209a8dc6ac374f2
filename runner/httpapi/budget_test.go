package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/toolstest"
)

// TestHTTPMaxResponseBytesHeader: X-PgTools-Max-Response-Bytes lowers the byte cap of one call
// (rows past it are dropped, truncated is set, the hint says why), never raises the database's,
// and an unusable value is an invalid_arguments answer naming the header.
func TestHTTPMaxResponseBytesHeader(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	// 200 rows of about 110 bytes of JSON each: some 22 KB in all.
	db.Exec(t, `CREATE TABLE wide (id int PRIMARY KEY, pad text);
		INSERT INTO wide SELECT i, repeat('x', 90) FROM generate_series(1, 200) i`)
	dsn := db.RoleDSN(t, "api")
	reg := toolstest.Registry(t, dsn, tools.Policy{MaxResponseBytes: 8192}, 4)
	srv := httptest.NewServer(httpapi.NewHandler(reg, runnertest.Tokens(), zerolog.Nop(), 4096))
	t.Cleanup(srv.Close)

	call := func(t *testing.T, header string) (int, map[string]any) {
		t.Helper()
		req := apitest.Request(http.MethodPost, srv.URL+"/v1/tools/select_query", runnertest.ReadToken, `{"table":"wide","order_by":"id"}`)
		if header != "" {
			req.Header.Set(httpapi.MaxResponseBytesHeader, header)
		}
		status, body, _ := apitest.Do(t, req)
		return status, body
	}
	rows := func(t *testing.T, header string) (int, map[string]any) {
		t.Helper()
		status, body := call(t, header)
		if status != 200 || body["success"] != true {
			t.Fatalf("header %q: status %d: %v", header, status, body)
		}
		return int(body["rowCount"].(float64)), body
	}

	full, _ := rows(t, "")
	capped, body := rows(t, "2048")
	if capped == 0 || capped >= full || body["truncated"] != true {
		t.Fatalf("with a 2048-byte cap: %d rows (database cap: %d), truncated %v", capped, full, body["truncated"])
	}
	if hint, _ := body["hint"].(string); !strings.Contains(hint, "2048-byte response cap") {
		t.Fatalf("hint does not name the cap: %q", hint)
	}
	if higher, _ := rows(t, "1000000"); higher != full {
		t.Fatalf("a header above the database's cap raised it: %d rows, want %d", higher, full)
	}

	for _, bad := range []string{"0", "-5", "16k", "1.5", "99999999999999999999"} {
		t.Run(bad, func(t *testing.T) {
			status, body := call(t, bad)
			if status != 400 || body["errorType"] != "invalid_arguments" {
				t.Fatalf("status %d: %v", status, body)
			}
			if msg, _ := body["error"].(string); !strings.Contains(msg, httpapi.MaxResponseBytesHeader) || strings.Contains(msg, bad) {
				t.Fatalf("the error must name the header and not echo the value: %q", msg)
			}
			if body["suggestion"] == "" {
				t.Fatalf("no suggestion: %v", body)
			}
		})
	}
}
