package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner"
	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/tools/pgtest"
)

// The tokens of the approval tests: the caller may write and holds the approve scope too (its
// own requests are still not its to decide), the approver only approves, and the reader has
// no approve scope.
const (
	aprCallerToken   = "apr-caller-token-0123456789"
	aprApproverToken = "apr-approver-token-0123456789"
	aprReaderToken   = "apr-reader-token-0123456789"
	// aprOtherToken approves on database "other" only.
	aprOtherToken = "apr-other-approver-token-0123456789"
	// aprMarker is a parameter value of the delete: it must never reach the audit log.
	aprMarker = "marker-7f3a9c"
)

// approvalRunner is a runtime built from a config file with require_approval rows_over 100 on
// its database, served over HTTP, with an approval clock the test moves and an audit log file.
type approvalRunner struct {
	db    *pgtest.DB
	rt    *runner.Runtime
	url   string
	audit string
	logs  *pgtest.SyncBuffer
	load  func(extra string) func() (*config.Config, error)
	mu    sync.Mutex
	now   time.Time
}

func newApprovalRunner(t *testing.T) *approvalRunner {
	t.Helper()
	f := &approvalRunner{db: pgtest.New(t), now: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC), logs: &pgtest.SyncBuffer{}}
	f.db.Exec(t, `CREATE TABLE orders (id int PRIMARY KEY, total int, note text)`)
	dsn := f.db.RoleDSN(t, "apr")
	f.db.Exec(t, `GRANT INSERT, DELETE ON orders TO "`+f.db.RoleName("apr")+`"`)
	dir := t.TempDir()
	f.audit = filepath.Join(dir, "audit.log")
	f.load = func(extra string) func() (*config.Config, error) {
		return func() (*config.Config, error) {
			doc := `{"tokens": [{"name": "agent", "token": "` + aprCallerToken + `", "scopes": ["read", "write", "approve"]},
			  {"name": "boss", "token": "` + aprApproverToken + `", "scopes": ["approve"]},
			  {"name": "reader", "token": "` + aprReaderToken + `", "scopes": ["read"]},
			  {"name": "other-boss", "token": "` + aprOtherToken + `", "scopes": ["approve"], "databases": ["other"]}],
			  "databases": {"default": {"url": "` + dsn + `", "policy": {"require_approval": [{"when": "rows_over", "rows": 100}]}},
			    "other": {"url": "` + dsn + `"}},
			  "approvals": {"ttl_seconds": 600}, "audit_log": "` + f.audit + `"` + extra + `}`
			cfg, err := config.LoadConfigFile(apitest.WriteFile(t, t.TempDir(), "pgtools.json", doc))
			if err != nil {
				return nil, err
			}
			return cfg, cfg.Validate()
		}
	}
	cfg, err := f.load("")()
	if err != nil {
		t.Fatal(err)
	}
	f.rt, err = runner.Build(context.Background(), cfg, zerolog.New(f.logs), runner.BuildOptions{ApprovalClock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.rt.Close)
	srv := httptest.NewServer(f.rt.Handler())
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func (f *approvalRunner) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *approvalRunner) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

// seed makes n orders that the delete matches (note = aprMarker) beside 50 it does not.
func (f *approvalRunner) seed(t *testing.T, n int) {
	t.Helper()
	f.db.Exec(t, fmt.Sprintf(`DELETE FROM orders; INSERT INTO orders SELECT i, i, '%s' FROM generate_series(1, %d) i;
		INSERT INTO orders SELECT 1000 + i, i, 'other' FROM generate_series(1, 50) i`, aprMarker, n))
}

func (f *approvalRunner) orders(t *testing.T) int64 {
	t.Helper()
	return f.db.QueryInt(t, "SELECT count(*) FROM orders")
}

// aprDelete deletes the marked orders: 120 of them after seed(120).
const aprDelete = `{"table": "orders", "where": "note = $1", "params": ["` + aprMarker + `"], "autocommit": true}`

func aprWithID(args, id string) string {
	return strings.TrimSuffix(args, "}") + `, "approval_id": "` + id + `"}`
}

func (f *approvalRunner) call(t *testing.T, token, args string) (int, map[string]any) {
	t.Helper()
	status, out, _ := apitest.Call(t, http.MethodPost, f.url+"/v1/tools/delete_data", token, args)
	return status, out
}

func (f *approvalRunner) api(t *testing.T, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	status, out, _ := apitest.Call(t, method, f.url+"/v1/approvals"+path, token, body)
	return status, out
}

// request makes the delete, which must wait for approval and change nothing, and returns the
// request's id.
func (f *approvalRunner) request(t *testing.T) string {
	t.Helper()
	before := f.orders(t)
	status, out := f.call(t, aprCallerToken, aprDelete)
	ap, _ := out["approval"].(map[string]any)
	if status != http.StatusForbidden || out["errorType"] != "approval_required" || ap == nil {
		t.Fatalf("the large delete: %d %v, want 403 approval_required", status, out)
	}
	if after := f.orders(t); after != before {
		t.Fatalf("the delete waiting for approval changed orders: %d → %d", before, after)
	}
	id, _ := ap["id"].(string)
	if !strings.HasPrefix(id, "apr_") || !strings.Contains(out["suggestion"].(string), id) {
		t.Fatalf("approval_required names no id: %v", out)
	}
	return id
}

func (f *approvalRunner) decide(t *testing.T, id, decision string) map[string]any {
	t.Helper()
	status, out := f.api(t, http.MethodPost, "/"+id, aprApproverToken, `{"decision": "`+decision+`"}`)
	if status != http.StatusOK {
		t.Fatalf("%s %s: %d %v", decision, id, status, out)
	}
	return out["approval"].(map[string]any)
}

// TestHTTPApprovalWalk is the walk over HTTP against a runtime built from a config
// file: a delete of 120 rows answers 403 approval_required and changes nothing; the caller's
// own token, even with the approve scope, cannot approve it; a token without the approve scope
// is refused 403; the approver lists, reads and approves it; the re-call commits the 120 rows
// once; an approval of 120 rows answers 409 approval_mismatch when 121 would change, and nothing
// changes; a denied request and an expired one never run. Metrics and the audit log record it
// all without a parameter value.
func TestHTTPApprovalWalk(t *testing.T) {
	t.Parallel()
	f := newApprovalRunner(t)
	f.seed(t, 120)
	id := f.request(t)

	// The approver's OpenAPI document has the approvals API; a caller's has not.
	for token, want := range map[string]bool{aprApproverToken: true, aprReaderToken: false} {
		_, doc, _ := apitest.Call(t, http.MethodGet, f.url+"/openapi.json", token, "")
		paths, _ := doc["paths"].(map[string]any)
		if item, _ := paths["/v1/approvals/{id}"].(map[string]any); (item["post"] != nil) != want || (paths["/v1/approvals"] != nil) != want {
			t.Errorf("/openapi.json of %.8s…: approvals API listed %v, want %v", token, item != nil, want)
		}
	}

	// Nobody but the approver decides it.
	if status, out := f.api(t, http.MethodPost, "/"+id, aprCallerToken, `{"decision": "approve"}`); status != http.StatusForbidden || out["errorType"] != "not_allowed" {
		t.Fatalf("the caller's own token approved: %d %v", status, out)
	}
	if status, out := f.api(t, http.MethodGet, "", aprCallerToken, ""); status != http.StatusOK || len(out["approvals"].([]any)) != 0 {
		t.Fatalf("the caller is shown its own request to decide: %d %v", status, out)
	}
	for _, req := range [][3]string{{http.MethodGet, "", ""}, {http.MethodGet, "/" + id, ""}, {http.MethodPost, "/" + id, `{"decision": "approve"}`}} {
		status, out := f.api(t, req[0], req[1], aprReaderToken, req[2])
		if status != http.StatusForbidden || out["errorType"] != "not_allowed" || !strings.Contains(out["error"].(string), "approve scope") {
			t.Fatalf("%s /v1/approvals%s without the approve scope: %d %v", req[0], req[1], status, out)
		}
	}
	// An approver of another database neither sees it nor learns that it exists.
	if status, out := f.api(t, http.MethodGet, "", aprOtherToken, ""); status != http.StatusOK || len(out["approvals"].([]any)) != 0 {
		t.Fatalf("another database's approver lists it: %d %v", status, out)
	}
	for _, req := range [][3]string{{http.MethodGet, "/" + id, ""}, {http.MethodPost, "/" + id, `{"decision": "approve"}`}} {
		_, unknown := f.api(t, req[0], "/apr_0123", aprOtherToken, req[2])
		status, out := f.api(t, req[0], req[1], aprOtherToken, req[2])
		if status != http.StatusBadRequest || out["errorType"] != "invalid_arguments" || strings.ReplaceAll(out["error"].(string), id, "apr_0123") != unknown["error"] {
			t.Fatalf("%s /v1/approvals/%s by another database's approver: %d %v (an unknown id: %v)", req[0], id, status, out, unknown)
		}
	}
	if status, out := f.api(t, http.MethodGet, "", "", ""); status != http.StatusUnauthorized {
		t.Fatalf("the approvals without a token: %d %v", status, out)
	}
	// Before a decision the id runs nothing.
	if status, out := f.call(t, aprCallerToken, aprWithID(aprDelete, id)); status != http.StatusForbidden || out["errorType"] != "approval_required" {
		t.Fatalf("a pending approval ran: %d %v", status, out)
	}

	// The approver sees the request as it is, and decides it.
	status, out := f.api(t, http.MethodGet, "", aprApproverToken, "")
	list, _ := out["approvals"].([]any)
	if status != http.StatusOK || len(list) != 1 {
		t.Fatalf("the approver's list: %d %v", status, out)
	}
	ap := list[0].(map[string]any)
	eff := ap["effect"].(map[string]any)
	if ap["id"] != id || ap["status"] != "pending" || ap["principal"] != "agent" || ap["database"] != "default" || ap["tool"] != "delete_data" ||
		eff["total"] != 120.0 || fmt.Sprint(eff["tables"]) != "[map[name:orders rows:120 schema:public]]" ||
		ap["arguments"].(map[string]any)["where"] != "note = $1" || ap["createdAt"] == nil || ap["expiresAt"] == nil || len(ap["rules"].([]any)) != 1 {
		t.Fatalf("the approver's view: %v", ap)
	}
	if status, one := f.api(t, http.MethodGet, "/"+id, aprApproverToken, ""); status != http.StatusOK || one["approval"].(map[string]any)["digest"] != ap["digest"] {
		t.Fatalf("GET /v1/approvals/%s: %d %v", id, status, one)
	}
	for _, bad := range []string{`{"decision": "maybe"}`, `{}`, `{"decision": "approve", "extra": 1}`, `approve`, `{"decision": "approve"} {}`} {
		if status, out := f.api(t, http.MethodPost, "/"+id, aprApproverToken, bad); status != http.StatusBadRequest || out["errorType"] != "invalid_arguments" {
			t.Fatalf("decision %s: %d %v", bad, status, out)
		}
	}
	if status, out := f.api(t, http.MethodGet, "/apr_nope", aprApproverToken, ""); status != http.StatusBadRequest || out["errorType"] != "invalid_arguments" {
		t.Fatalf("an unknown id: %d %v", status, out)
	}
	if got := f.decide(t, id, "approve"); got["status"] != "approved" || got["approver"] != "boss" || got["decidedAt"] == nil {
		t.Fatalf("approved: %v", got)
	}
	if status, out := f.api(t, http.MethodPost, "/"+id, aprApproverToken, `{"decision": "deny"}`); status != http.StatusBadRequest || !strings.Contains(out["error"].(string), "approved") {
		t.Fatalf("a decided request decided again: %d %v", status, out)
	}

	// The re-call commits the 120 rows, once.
	if status, out := f.call(t, aprCallerToken, aprWithID(aprDelete, id)); status != http.StatusOK || out["affectedRows"] != 120.0 {
		t.Fatalf("the approved delete: %d %v", status, out)
	}
	if n := f.orders(t); n != 50 {
		t.Fatalf("after the approved delete: %d orders, want 50", n)
	}
	f.seed(t, 120)
	if status, out := f.call(t, aprCallerToken, aprWithID(aprDelete, id)); status != http.StatusBadRequest || !strings.Contains(out["error"].(string), "used") || f.orders(t) != 170 {
		t.Fatalf("an approval used twice: %d %v", status, out)
	}

	// Approved for 120 rows, 121 would change: 409, nothing changes, the approval is used up.
	id = f.request(t)
	f.decide(t, id, "approve")
	f.db.Exec(t, `INSERT INTO orders VALUES (500, 1, '`+aprMarker+`')`)
	status, out = f.call(t, aprCallerToken, aprWithID(aprDelete, id))
	if status != http.StatusConflict || out["errorType"] != "approval_mismatch" || !strings.Contains(out["error"].(string), "121 rows of public.orders") {
		t.Fatalf("121 rows under an approval of 120: %d %v", status, out)
	}
	if n := f.orders(t); n != 171 {
		t.Fatalf("a mismatched approval changed orders: %d, want 171", n)
	}
	if status, _ := f.call(t, aprCallerToken, aprWithID(aprDelete, id)); status != http.StatusBadRequest {
		t.Fatalf("a mismatched approval was usable again: %d", status)
	}

	// Denied: the re-call is refused and changes nothing.
	id = f.request(t)
	f.decide(t, id, "deny")
	if status, out := f.call(t, aprCallerToken, aprWithID(aprDelete, id)); status != http.StatusForbidden || out["errorType"] != "not_allowed" || !strings.Contains(out["error"].(string), "denied by boss") {
		t.Fatalf("a denied request: %d %v", status, out)
	}

	// Expiry: a request nobody decides in time, and an approval not used in time.
	id = f.request(t)
	f.advance(11 * time.Minute)
	if status, out := f.api(t, http.MethodPost, "/"+id, aprApproverToken, `{"decision": "approve"}`); status != http.StatusBadRequest || !strings.Contains(out["error"].(string), "expired") {
		t.Fatalf("an expired request was approved: %d %v", status, out)
	}
	id = f.request(t)
	f.decide(t, id, "approve")
	f.advance(11 * time.Minute)
	if status, out := f.call(t, aprCallerToken, aprWithID(aprDelete, id)); status != http.StatusBadRequest || !strings.Contains(out["error"].(string), "expired") {
		t.Fatalf("an expired approval ran: %d %v", status, out)
	}
	if n := f.orders(t); n != 171 {
		t.Fatalf("orders after the refused calls: %d, want 171", n)
	}

	// Metrics: every event, counted.
	metrics := scrape(t, f.url)
	for _, want := range []string{"pgtools_approvals_pending 0", `pgtools_approval_events_total{event="requested"} 5`, `pgtools_approval_events_total{event="approved"} 3`,
		`pgtools_approval_events_total{event="denied"} 1`, `pgtools_approval_events_total{event="expired"} 2`, `pgtools_approval_events_total{event="used"} 1`,
		`pgtools_approval_events_total{event="mismatched"} 1`} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}

	// The audit log: each request's story with its id, digest and approver, never a value.
	raw, err := os.ReadFile(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), aprMarker) {
		t.Fatalf("the audit log holds a parameter value:\n%s", raw)
	}
	outcomes := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		o, _ := ev["outcome"].(string)
		if strings.HasPrefix(o, "approval_") {
			outcomes[o]++
			if id, _ := ev["approval_id"].(string); !strings.HasPrefix(id, "apr_") || !strings.HasPrefix(fmt.Sprint(ev["digest"]), "sha256:") {
				t.Errorf("audit line without the approval's id or digest: %s", line)
			}
			if (o == "approval_approved" || o == "approval_denied") != (ev["approver"] == "boss") {
				t.Errorf("audit line with a wrong approver: %s", line)
			}
		}
	}
	want := map[string]int{"approval_requested": 5, "approval_approved": 3, "approval_denied": 1, "approval_expired": 2, "approval_used": 1, "approval_mismatched": 1}
	if fmt.Sprint(outcomes) != fmt.Sprint(want) {
		t.Errorf("audit outcomes %v, want %v", outcomes, want)
	}
}

// scrape reads url's /metrics.
func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestApprovalsSurviveReload: the runtime's one approval store serves every generation, so a
// request made before a configuration reload is decided and used after it; a changed
// approvals setting is logged as needing a restart and the running store keeps its own.
func TestApprovalsSurviveReload(t *testing.T) {
	t.Parallel()
	f := newApprovalRunner(t)
	f.seed(t, 120)
	id := f.request(t)
	if err := f.rt.Reload(context.Background(), f.load(`, "log_level": "info", "limits": {"max_body_bytes": 65536}`)); err != nil {
		t.Fatal(err)
	}
	f.decide(t, id, "approve")
	if err := f.rt.Reload(context.Background(), f.load(`, "approvals_unused": 1`)); err == nil {
		t.Fatal("a config with an unknown key was accepted")
	}
	if status, out := f.call(t, aprCallerToken, aprWithID(aprDelete, id)); status != http.StatusOK || out["affectedRows"] != 120.0 {
		t.Fatalf("the approved delete after two reloads: %d %v", status, out)
	}
	if n, _ := f.rt.Generation(); n != 2 || f.rt.Registry().Approvals() != f.rt.Approvals() {
		t.Fatalf("generation %d; the registry's store is the runtime's: %v", n, f.rt.Registry().Approvals() == f.rt.Approvals())
	}
	// The reload swapped the approvals setting: it needs a restart, and the store keeps 600 s.
	if err := f.rt.Reload(context.Background(), func() (*config.Config, error) {
		cfg, err := f.load("")()
		if err == nil {
			cfg.Approvals.TTLSeconds = 5
		}
		return cfg, err
	}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.logs.String(), `"settings":["approvals.ttl_seconds"]`) || f.rt.Approvals().TTL() != 600*time.Second {
		t.Fatalf("approvals.ttl_seconds on reload: store TTL %s, log:\n%s", f.rt.Approvals().TTL(), f.logs.String())
	}
	// Without the rule after a reload, the same delete commits without approval.
	f.seed(t, 120)
	if err := f.rt.Reload(context.Background(), func() (*config.Config, error) {
		cfg, err := f.load("")()
		if err == nil {
			d := cfg.Databases["default"]
			d.Policy.RequireApproval = nil
			cfg.Databases["default"] = d
		}
		return cfg, err
	}); err != nil {
		t.Fatal(err)
	}
	if status, out := f.call(t, aprCallerToken, aprDelete); status != http.StatusOK || out["affectedRows"] != 120.0 {
		t.Fatalf("the delete once the rule was reloaded away: %d %v", status, out)
	}
}

// TestMCPApprovalWalk: the same walk over MCP, on both protocol generations (2025-11-25 with
// a session, 2026-07-28 without): the delete through tools/call is an isError result carrying
// errorType approval_required and the request's id, and nothing changes; the caller's own
// token cannot approve it; once the approver approves it over HTTP, the tools/call with
// approval_id commits the 120 rows, once.
func TestMCPApprovalWalk(t *testing.T) {
	t.Parallel()
	f := newApprovalRunner(t)
	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(v, func(t *testing.T) {
			f.seed(t, 120)
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(t.Context(),
				apitest.MCPTransport(f.url, aprCallerToken), &mcp.ClientSessionOptions{ProtocolVersion: v})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cs.Close() })
			if got := cs.InitializeResult().ProtocolVersion; got != v {
				t.Fatalf("protocol %s, want %s", got, v)
			}
			call := func(args string) (bool, map[string]any) {
				t.Helper()
				var m map[string]any
				if err := json.Unmarshal([]byte(args), &m); err != nil {
					t.Fatal(err)
				}
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "delete_data", Arguments: m})
				if err != nil {
					t.Fatal(err)
				}
				var out map[string]any
				if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &out); err != nil {
					t.Fatal(err)
				}
				return res.IsError, out
			}
			isErr, out := call(aprDelete)
			ap, _ := out["approval"].(map[string]any)
			if !isErr || out["errorType"] != "approval_required" || ap == nil || f.orders(t) != 170 {
				t.Fatalf("the large delete over MCP: isError %v %v, %d orders", isErr, out, f.orders(t))
			}
			id := ap["id"].(string)
			if status, out := f.api(t, http.MethodPost, "/"+id, aprCallerToken, `{"decision": "approve"}`); status != http.StatusForbidden {
				t.Fatalf("the caller's own token approved: %d %v", status, out)
			}
			f.decide(t, id, "approve")
			if isErr, out := call(aprWithID(aprDelete, id)); isErr || out["affectedRows"] != 120.0 || f.orders(t) != 50 {
				t.Fatalf("the approved delete over MCP: isError %v %v, %d orders", isErr, out, f.orders(t))
			}
			f.seed(t, 120)
			if isErr, out := call(aprWithID(aprDelete, id)); !isErr || out["errorType"] != "invalid_arguments" || f.orders(t) != 170 {
				t.Fatalf("an approval used twice over MCP: %v %v", isErr, out)
			}
		})
	}
}
