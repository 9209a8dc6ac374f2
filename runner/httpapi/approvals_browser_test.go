package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/tools"
)

// chromiumPath is Debian's chromium (apt-get install chromium; .ci/install-deps.sh installs it);
// PGTOOLS_CHROMIUM names another.
func chromiumPath() string {
	if p := os.Getenv("PGTOOLS_CHROMIUM"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

// TestApprovalsPageInBrowser drives /approvals in a real headless chromium on a 390 px wide
// phone viewport (testdata/approvals-browser/check.mjs, with playwright-core) against a real
// runner and PostgreSQL: a caller's token is refused at sign-in; the approver sees three
// pending deletes with caller, database, table and rows; approves one, and the caller's re-call
// with its approval_id commits; denies one, whose re-call is refused; the third expires while
// shown and cannot be approved. The page loads nothing from elsewhere and the browser reports no
// CSP violation. It needs node, npm and chromium: without them it skips locally and fails in CI.
func TestApprovalsPageInBrowser(t *testing.T) {
	t.Parallel()
	need := map[string]string{"node": "", "npm": "", "chromium": chromiumPath()}
	for tool := range need {
		path := need[tool]
		var err error
		if path == "" {
			_, err = exec.LookPath(tool)
		} else {
			_, err = os.Stat(path)
		}
		if err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is missing (%v); CI must run the browser test of /approvals (make deps-test installs chromium, node and npm)", tool, err)
			}
			t.Skipf("%s is missing (%v): skipping the browser test of /approvals (apt-get install chromium nodejs npm to run it)", tool, err)
		}
	}
	dir := filepath.Join("testdata", "approvals-browser")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	npm := exec.CommandContext(ctx, "npm", "ci", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error")
	npm.Dir = dir
	if out, err := npm.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}

	f := newApprovalsFixture(t)
	// The runner as served, plus one test-only route that moves the approval store's clock.
	mux := http.NewServeMux()
	mux.Handle("/", f.srv.Config.Handler)
	mux.HandleFunc("POST /_test/advance", func(w http.ResponseWriter, r *http.Request) {
		s, err := strconv.Atoi(r.URL.Query().Get("seconds"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.clock.Advance(time.Duration(s) * time.Second)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	// The request to expire is 10 minutes older than the others: 6 more minutes end it (TTL 15
	// minutes) and leave the approval of the first well within its time.
	expire := f.request(t, pageCallerToken, "delete_data", deleteArgs(100, 250))
	f.clock.Advance(10 * time.Minute)
	approveArgs, denyArgs := deleteArgs(1, 120), deleteArgs(121, 240)
	approve := f.request(t, pageCallerToken, "delete_data", approveArgs)
	deny := f.request(t, pageCallerToken, "delete_data", denyArgs)

	env, _ := json.Marshal(map[string]string{"chromium": chromiumPath(), "caller": pageCallerToken, "approver": pageApproverToken,
		"approve": approve, "deny": deny, "expire": expire})
	cmd := exec.CommandContext(ctx, "node", "check.mjs", srv.URL)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PGTOOLS_APPROVALS="+string(env))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("check.mjs: %v\n%s\n%s", err, out, stderr.String())
	}
	type card struct {
		Caller, Database, Total, Age string
		Tables, Rows                 []string
	}
	var r struct {
		Error, CSP, StylesheetApplied, CallerRefused, Approver, Approved, Denied, Expired string
		CallerSignedIn, ApprovedStillListed, DeniedStillListed                            bool
		ExpireListedBefore, ExpireListedAfter, EmptyShown, SignedOut                      bool
		Cards                                                                             map[string]*card
		Layout                                                                            struct {
			Inner, Scroll int
			Visible       bool
			Button        *struct{ X, Y, Width, Height float64 }
		}
		InjectedScriptRan                                      bool
		ConsoleErrors, ProbeViolations, ForeignRequests, Steps []string
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("check.mjs printed no report: %v\n%s\n%s", err, out, stderr.String())
	}
	t.Logf("browser steps: %s; CSP probe: %q", strings.Join(r.Steps, ", "), r.ProbeViolations)
	if r.Error != "" {
		t.Fatalf("check.mjs stopped after %q: %s\nreport: %s", r.Steps, r.Error, out)
	}
	if r.CSP != wantCSP || r.StylesheetApplied != "44px" {
		t.Errorf("CSP %q; the stylesheet applied: min-height %q (want 44px)", r.CSP, r.StylesheetApplied)
	}
	// The probe's script, image and style were each refused by the policy, and reported.
	if r.InjectedScriptRan || len(r.ProbeViolations) < 3 {
		t.Errorf("markup injected into the page: script ran %v; violations reported %q", r.InjectedScriptRan, r.ProbeViolations)
	}
	for _, v := range r.ProbeViolations {
		if !strings.Contains(v, "Content Security Policy") {
			t.Errorf("the probe reported %q, not a CSP violation", v)
		}
	}
	// The rest of the run: no violation and nothing loaded from elsewhere. The refusals the test
	// provokes (403 sign-in, for instance) log as failed loads; nothing else may.
	for _, msg := range r.ConsoleErrors {
		if !strings.HasPrefix(msg, "Failed to load resource: the server responded with a status of 4") {
			t.Errorf("browser console: %q", msg)
		}
	}
	if len(r.ForeignRequests) > 0 {
		t.Errorf("requests elsewhere: %q", r.ForeignRequests)
	}
	if r.CallerSignedIn || !strings.Contains(r.CallerRefused, "lacks the approve scope") {
		t.Errorf("the caller's token at sign-in: signed in %v, message %q", r.CallerSignedIn, r.CallerRefused)
	}
	if r.Approver != "boss" {
		t.Errorf("signed in as %q", r.Approver)
	}
	for id, want := range map[string]card{
		approve: {Caller: "agent", Database: "default", Total: "120", Tables: []string{"public.orders"}, Rows: []string{"120"}},
		deny:    {Caller: "agent", Database: "default", Total: "120", Tables: []string{"public.orders"}, Rows: []string{"120"}},
		expire:  {Caller: "agent", Database: "default", Total: "151", Tables: []string{"public.orders"}, Rows: []string{"151"}, Age: "10m ago"},
	} {
		got := r.Cards[id]
		if got == nil || got.Caller != want.Caller || got.Database != want.Database || got.Total != want.Total ||
			strings.Join(got.Tables, ",") != strings.Join(want.Tables, ",") || strings.Join(got.Rows, ",") != strings.Join(want.Rows, ",") ||
			!strings.HasPrefix(got.Age, strings.TrimSuffix(want.Age, " ago")) {
			t.Errorf("request %s as the page shows it: %+v, want %+v", id, got, want)
		}
	}
	l := r.Layout
	if l.Inner != 390 || l.Scroll > l.Inner || !l.Visible || l.Button == nil || l.Button.X < 0 || l.Button.X+l.Button.Width > float64(l.Inner) || l.Button.Height < 44 {
		t.Errorf("on a 390 px wide screen: %+v (button %+v)", l, l.Button)
	}
	if !strings.Contains(r.Approved, "Approved "+approve) || r.ApprovedStillListed || !strings.Contains(r.Denied, "Denied "+deny) || r.DeniedStillListed {
		t.Errorf("decisions: %q (still listed %v), %q (still listed %v)", r.Approved, r.ApprovedStillListed, r.Denied, r.DeniedStillListed)
	}
	if !r.ExpireListedBefore || !strings.Contains(r.Expired, "is expired") || r.ExpireListedAfter || !r.EmptyShown {
		t.Errorf("expiry: listed before %v, message %q, listed after %v, empty list shown %v", r.ExpireListedBefore, r.Expired, r.ExpireListedAfter, r.EmptyShown)
	}
	if !r.SignedOut {
		t.Errorf("still signed in after sign-out")
	}

	// What the decisions did, seen by the caller and in the database.
	status, res, _ := apitest.Call(t, http.MethodPost, srv.URL+"/v1/tools/delete_data", pageCallerToken, withApprovalID(approveArgs, approve))
	if status != http.StatusOK || res["affectedRows"] != float64(120) || f.orders(t) != 180 {
		t.Fatalf("the approved re-call: %d %v, %d rows left", status, res, f.orders(t))
	}
	status, res, _ = apitest.Call(t, http.MethodPost, srv.URL+"/v1/tools/delete_data", pageCallerToken, withApprovalID(denyArgs, deny))
	if status != http.StatusForbidden || res["errorType"] != "not_allowed" {
		t.Errorf("the denied re-call: %d %v", status, res)
	}
	status, res, _ = apitest.Call(t, http.MethodPost, srv.URL+"/v1/tools/delete_data", pageCallerToken, withApprovalID(deleteArgs(100, 250), expire))
	if status == http.StatusOK || !strings.Contains(res["error"].(string), "expired") {
		t.Errorf("the expired re-call: %d %v", status, res)
	}
	if n := f.orders(t); n != 180 {
		t.Errorf("%d rows left, want 180", n)
	}
	ev := f.store.Counts().Events
	if ev["approved"] != 1 || ev["denied"] != 1 || ev["used"] != 1 || ev["expired"] != 1 {
		t.Errorf("approval events: %v", ev)
	}
	if _, e := f.store.Get(tools.Principal{Name: "boss", Scopes: []string{"approve"}}.Party(), approve); e != nil {
		t.Errorf("the used approval: %v", e)
	}
}
