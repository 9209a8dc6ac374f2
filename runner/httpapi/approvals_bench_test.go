package httpapi_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/tools/pgtest"
)

// BenchmarkApprovalsHTTP measures, through the HTTP API of a runtime built from a config file:
// an update_data by primary key without approval rules ("no_rules") and under a rule it does
// not match ("rule_not_matched": the price of measuring every write's effect), and an
// approver's GET /v1/approvals with 20 requests pending ("list_pending"; the approver's calls
// per second are not limited here).
func BenchmarkApprovalsHTTP(b *testing.B) {
	db := pgtest.New(b)
	db.Exec(b, `CREATE TABLE items (id int PRIMARY KEY, n int); INSERT INTO items SELECT i, 0 FROM generate_series(1, 200) i`)
	dsn := db.RoleDSN(b, "aprbench")
	db.Exec(b, `GRANT UPDATE ON items TO "`+db.RoleName("aprbench")+`"`)
	serve := func(rules string) string {
		doc := `{"tokens": [{"name": "agent", "token": "` + aprCallerToken + `", "scopes": ["read", "write"]},
		  {"name": "boss", "token": "` + aprApproverToken + `", "scopes": ["approve"]}],
		  "limits": {"approver_calls_per_second": 1000000},
		  "databases": {"default": {"url": "` + dsn + `", "max_conns": 2, "policy": {"require_approval": ` + rules + `}}}}`
		return runnertest.NewServerFixture(b, runnertest.ConfigDoc(b, doc)).HTTP.URL
	}
	post := func(b *testing.B, url, token, path, body string) {
		resp, err := http.DefaultClient.Do(apitest.Request(http.MethodPost, url+path, token, body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusForbidden {
			b.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
	update := func(i int) string {
		return `{"table":"items","set":{"n":` + strconv.Itoa(i) + `},"where":"id = $1","params":[` + strconv.Itoa(i%200+1) + `],"autocommit":true}`
	}
	for _, c := range []struct{ name, rules string }{{"no_rules", `[]`}, {"rule_not_matched", `[{"when": "rows_over", "rows": 100}]`}} {
		url := serve(c.rules)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				post(b, url, aprCallerToken, "/v1/tools/update_data", update(i))
			}
		})
	}
	url := serve(`[{"when": "rows_over", "rows": 0}]`)
	for i := 0; i < 20; i++ {
		post(b, url, aprCallerToken, "/v1/tools/update_data", update(i))
	}
	b.Run("list_pending", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			status, out, _ := apitest.Call(b, http.MethodGet, url+"/v1/approvals", aprApproverToken, "")
			if status != http.StatusOK || !strings.Contains(strings.Repeat("x", len(out["approvals"].([]any))), strings.Repeat("x", 20)) {
				b.Fatalf("list: %d, %d approvals", status, len(out["approvals"].([]any)))
			}
		}
	})
}
