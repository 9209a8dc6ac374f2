package httpapi_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/auth/authtest"
	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/approval"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/toolstest"
)

const (
	pageCallerToken   = "apr-caller-token-0123456789abcdef"
	pageApproverToken = "apr-approver-token-0123456789abcd"
	// aprSelfToken may both write and approve: it must never see or decide its own requests.
	aprSelfToken = "apr-self-token-0123456789abcdefgh"
)

// wantCSP is the page's whole policy: a change to it must change this test.
const wantCSP = "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// testClock is a clock the test moves, shared by the approval store and the page's sign-ins.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// approvalsFixture is the HTTP API over a database whose table orders (300 rows, total = id)
// needs approval for deletes of more than 100 rows, with an approval store on a test clock.
type approvalsFixture struct {
	srv   *httptest.Server
	db    *pgtest.DB
	reg   *tools.Registry
	store *approval.Store
	clock *testClock
	log   *pgtest.SyncBuffer
}

func approvalsTokens() []auth.Token {
	return []auth.Token{
		{Secret: pageCallerToken, Name: "agent", Scopes: []string{"read", "write"}},
		{Secret: pageApproverToken, Name: "boss", Scopes: []string{"approve"}},
		{Secret: aprSelfToken, Name: "selfie", Scopes: []string{"read", "write", "approve"}},
	}
}

func newApprovalsFixture(t *testing.T) *approvalsFixture {
	t.Helper()
	db := pgtest.New(t)
	db.Exec(t, `CREATE TABLE orders (id int PRIMARY KEY, total int NOT NULL); INSERT INTO orders SELECT i, i FROM generate_series(1, 300) i`)
	dsn := db.RoleDSN(t, "apr")
	db.Exec(t, "GRANT DELETE ON orders TO "+pgx.Identifier{db.RoleName("apr")}.Sanitize())
	clock := &testClock{now: time.Now()}
	store := approval.NewStore(approval.Options{TTL: 15 * time.Minute, Now: clock.Now})
	policy := tools.Policy{RequireApproval: []approval.Rule{{When: approval.WhenRowsOver, Rows: 100}}}
	reg := toolstest.RegistryWith(t, dsn, policy, 4, tools.Options{Approvals: store})
	logs := &pgtest.SyncBuffer{}
	srv := httptest.NewServer(httpapi.NewHandlerWith(reg, httpapi.HandlerOptions{Tokens: approvalsTokens(), Log: zerolog.New(logs)}))
	t.Cleanup(srv.Close)
	return &approvalsFixture{srv: srv, db: db, reg: reg, store: store, clock: clock, log: logs}
}

// deleteArgs deletes the orders with total in [from, to].
func deleteArgs(from, to int) string {
	return fmt.Sprintf(`{"table": "orders", "where": "total BETWEEN $1 AND $2", "params": [%d, %d], "autocommit": true}`, from, to)
}

// request makes a call that must wait for approval and returns its approval id.
func (f *approvalsFixture) request(t *testing.T, token, tool, args string) string {
	t.Helper()
	status, out, _ := apitest.Call(t, http.MethodPost, f.srv.URL+"/v1/tools/"+tool, token, args)
	ap, _ := out["approval"].(map[string]any)
	id, _ := ap["id"].(string)
	if status != http.StatusForbidden || out["errorType"] != "approval_required" || !strings.HasPrefix(id, "apr_") {
		t.Fatalf("%s %s: want 403 approval_required with an approval id, got %d %v", tool, args, status, out)
	}
	return id
}

func (f *approvalsFixture) orders(t *testing.T) int64 {
	t.Helper()
	return f.db.QueryInt(t, "SELECT count(*) FROM orders")
}

// pageClient is a browser as far as the page can tell: it keeps cookies, follows the 303
// after a form, and sends Origin with every POST (override with the origin field).
type pageClient struct {
	t      *testing.T
	c      *http.Client
	base   string
	origin string // "" sends no Origin header
	site   string // Sec-Fetch-Site, "" for none
	// forwardedProto is sent as X-Forwarded-Proto by signInCookie, "" for none.
	forwardedProto string
}

func newPageClient(t *testing.T, base string, rt http.RoundTripper) *pageClient {
	jar, _ := cookiejar.New(nil)
	return &pageClient{t: t, c: &http.Client{Jar: jar, Transport: rt}, base: base, origin: base}
}

func (c *pageClient) do(req *http.Request) (int, string, http.Header) {
	c.t.Helper()
	resp, err := c.c.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

func (c *pageClient) get(path string) (int, string, http.Header) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.base+path, nil)
	return c.do(req)
}

// post sends form to path; the answer is the page the 303 leads to, or the refusal.
func (c *pageClient) post(path string, form url.Values) (int, string, http.Header) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if c.origin != "" {
		req.Header.Set("Origin", c.origin)
	}
	if c.site != "" {
		req.Header.Set("Sec-Fetch-Site", c.site)
	}
	return c.do(req)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the CSRF token of the page body shows.
func (c *pageClient) csrf(body string) string {
	c.t.Helper()
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		c.t.Fatalf("no CSRF field in the page:\n%s", body)
	}
	return m[1]
}

// signIn signs in with token from the sign-in form and returns the list page.
func (c *pageClient) signIn(token string) (int, string) {
	c.t.Helper()
	_, form, _ := c.get("/approvals")
	status, body, _ := c.post("/approvals/signin", url.Values{"token": {token}, "csrf": {c.csrf(form)}})
	return status, body
}

// signInCookie signs in with token over rt, outside the cookie jar, and returns the sign-in
// cookie as the server set it.
func (c *pageClient) signInCookie(token string, rt http.RoundTripper) *http.Cookie {
	c.t.Helper()
	_, form, _ := c.get("/approvals")
	req, _ := http.NewRequest(http.MethodPost, c.base+"/approvals/signin", strings.NewReader(url.Values{"token": {token}, "csrf": {c.csrf(form)}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", c.base)
	if c.forwardedProto != "" {
		req.Header.Set("X-Forwarded-Proto", c.forwardedProto)
	}
	for _, ck := range c.c.Jar.Cookies(req.URL) {
		req.AddCookie(ck)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		c.t.Fatal(err)
	}
	resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if ck.Name == "pgtools_approvals" {
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/approvals" {
				c.t.Fatalf("sign-in answer: %d %v", resp.StatusCode, resp.Header)
			}
			return ck
		}
	}
	c.t.Fatalf("sign-in set no cookie: %d %v", resp.StatusCode, resp.Header)
	return nil
}

func (c *pageClient) cookie(name string) *http.Cookie {
	u, _ := url.Parse(c.base + "/approvals")
	for _, ck := range c.c.Jar.Cookies(u) {
		if ck.Name == name {
			return ck
		}
	}
	return nil
}

// TestApprovalsPageHeaders checks what every answer of the page carries: the strict CSP and the
// headers that keep it out of frames, referrers and caches, on the form, the stylesheet, a
// missing page and a refused POST; and that the page loads nothing from elsewhere and runs no
// script.
func TestApprovalsPageHeaders(t *testing.T) {
	t.Parallel()
	f := newApprovalsFixture(t)
	c := newPageClient(t, f.srv.URL, nil)
	check := func(what string, h http.Header) {
		t.Helper()
		want := map[string]string{"Content-Security-Policy": wantCSP, "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
			"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
		for k, v := range want {
			if got := h.Get(k); got != v {
				t.Errorf("%s: %s = %q, want %q", what, k, got, v)
			}
		}
	}
	status, body, h := c.get("/approvals")
	check("GET /approvals", h)
	if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /approvals: %d %s", status, h.Get("Content-Type"))
	}
	for _, want := range []string{`<meta name="viewport" content="width=device-width, initial-scale=1">`, `<link rel="stylesheet" href="/approvals/style.css">`,
		`action="/approvals/signin"`, `type="password"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the sign-in page lacks %s", want)
		}
	}
	for _, banned := range []string{"<script", "http://", "https://", " style=", "javascript:"} {
		if strings.Contains(body, banned) {
			t.Errorf("the sign-in page contains %q", banned)
		}
	}
	status, css, h := c.get("/approvals/style.css")
	check("the stylesheet", h)
	if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/css") || !strings.Contains(css, ".approve") || strings.Contains(css, "url(") {
		t.Errorf("the stylesheet: %d %s", status, h.Get("Content-Type"))
	}
	status, _, h = c.get("/approvals/no-such-page")
	check("a missing page", h)
	if status != http.StatusNotFound {
		t.Errorf("a missing page: %d", status)
	}
	c.origin = "https://evil.example"
	status, _, h = c.post("/approvals/signin", url.Values{})
	check("a refused POST", h)
	if status != http.StatusForbidden {
		t.Errorf("a cross-site sign-in: %d", status)
	}
}

// TestApprovalsPageCSRF sends the page's forms without the CSRF token, with a wrong one, from
// another origin, and with no sign of their origin at all: each is refused, and nothing is
// signed in, decided or signed out.
func TestApprovalsPageCSRF(t *testing.T) {
	t.Parallel()
	f := newApprovalsFixture(t)
	id := f.request(t, pageCallerToken, "delete_data", deleteArgs(1, 120))
	c := newPageClient(t, f.srv.URL, nil)
	_, form, _ := c.get("/approvals")
	token := c.csrf(form)

	type attempt struct {
		name, origin, site, csrf string
	}
	attempts := func(good string) []attempt {
		return []attempt{
			{"no CSRF token", f.srv.URL, "", ""},
			{"a wrong CSRF token", f.srv.URL, "", good[:len(good)-1] + "x"},
			{"another origin", "https://evil.example", "", good},
			{"Origin null", "null", "", good},
			{"a cross-site fetch", f.srv.URL, "cross-site", good},
			{"a same-site fetch from a sibling host", "", "same-site", good},
			{"no Origin and no Sec-Fetch-Site", "", "", good},
		}
	}
	for _, a := range attempts(token) {
		c.origin, c.site = a.origin, a.site
		status, body, _ := c.post("/approvals/signin", url.Values{"token": {pageApproverToken}, "csrf": {a.csrf}})
		if status != http.StatusForbidden || strings.Contains(body, `id="approver"`) || c.cookie("pgtools_approvals") != nil {
			t.Errorf("sign-in with %s: %d, signed in: %v", a.name, status, strings.Contains(body, `id="approver"`))
		}
	}
	// What Chrome sends with the page's own forms under Referrer-Policy no-referrer.
	c.origin, c.site = "null", "same-origin"
	if status, body := c.signIn(pageApproverToken); status != http.StatusOK || !strings.Contains(body, id) {
		t.Fatalf("sign-in from the page: %d\n%s", status, body)
	}
	_, list, _ := c.get("/approvals")
	good := c.csrf(list)
	if good == token {
		t.Fatalf("the sign-in kept the sign-in form's CSRF token")
	}
	for _, a := range append(attempts(good), attempt{"the sign-in form's token", f.srv.URL, "", token}) {
		c.origin, c.site = a.origin, a.site
		status, _, _ := c.post("/approvals/"+id, url.Values{"decision": {"approve"}, "csrf": {a.csrf}})
		if ap, _ := f.store.Get(tools.Principal{Name: "boss", Scopes: []string{"approve"}}.Party(), id); status != http.StatusForbidden || ap.Status != approval.Pending {
			t.Errorf("approve with %s: %d, request now %s", a.name, status, ap.Status)
		}
		status, _, _ = c.post("/approvals/signout", url.Values{"csrf": {a.csrf}})
		if _, body, _ := c.get("/approvals"); status != http.StatusForbidden || !strings.Contains(body, `id="approver"`) {
			t.Errorf("sign-out with %s: %d, then signed out", a.name, status)
		}
	}
	c.origin, c.site = f.srv.URL, ""
	if status, body, _ := c.post("/approvals/"+id, url.Values{"decision": {"approve"}, "csrf": {good}}); status != http.StatusOK || !strings.Contains(body, "Approved "+id) {
		t.Fatalf("approve from the page: %d\n%s", status, body)
	}
}

// TestApprovalsPageSignIn: a caller's token (no approve scope) and an unknown token are refused
// with a message on the page; an approver's sign-in sets an HttpOnly, SameSite=Strict cookie for
// /approvals holding a random id (never the token), Secure over TLS, that ends after the
// sign-in's time and with sign-out. No token reaches the log.
func TestApprovalsPageSignIn(t *testing.T) {
	t.Parallel()
	f := newApprovalsFixture(t)
	c := newPageClient(t, f.srv.URL, nil)
	status, body := c.signIn(pageCallerToken)
	if status != http.StatusForbidden || !strings.Contains(body, "lacks the approve scope") || !strings.Contains(body, "agent") || c.cookie("pgtools_approvals") != nil {
		t.Errorf("a caller's token: %d\n%s", status, body)
	}
	status, body = c.signIn("no-such-token-0123456789abcdef")
	if status != http.StatusUnauthorized || !strings.Contains(body, "does not accept that token") || c.cookie("pgtools_approvals") != nil {
		t.Errorf("an unknown token: %d\n%s", status, body)
	}
	if status, body = c.signIn("   "); status != http.StatusBadRequest {
		t.Errorf("an empty token: %d\n%s", status, body)
	}

	// A runner without tokens has no approvers.
	open := httptest.NewServer(httpapi.NewHandlerWith(f.reg, httpapi.HandlerOptions{Log: zerolog.Nop()}))
	t.Cleanup(open.Close)
	if status, body := newPageClient(t, open.URL, nil).signIn("anything"); status != http.StatusForbidden || !strings.Contains(body, "no tokens configured") {
		t.Errorf("sign-in on a runner without tokens: %d\n%s", status, body)
	}

	// The cookie as the server sets it.
	signIn := c.signInCookie(pageApproverToken, http.DefaultTransport)
	if !signIn.HttpOnly || signIn.SameSite != http.SameSiteStrictMode || signIn.Path != "/approvals" || signIn.Secure ||
		signIn.MaxAge != int(httpapi.DefaultSignInTTL/time.Second) || len(signIn.Value) != 43 || strings.Contains(signIn.Value, pageApproverToken) {
		t.Errorf("sign-in cookie over plain HTTP: %+v", signIn)
	}
	logs := f.log.String()
	for _, secret := range []string{pageApproverToken, pageCallerToken, "no-such-token"} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds a token:\n%s", logs)
		}
	}

	// Over TLS the cookie is Secure.
	tlsSrv := httptest.NewTLSServer(f.srv.Config.Handler)
	t.Cleanup(tlsSrv.Close)
	tc := newPageClient(t, tlsSrv.URL, &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}})
	if ck := tc.signInCookie(pageApproverToken, tc.c.Transport); !ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
		t.Errorf("over TLS the sign-in cookie is not Secure: %+v", ck)
	}
	// So it is behind a proxy that ends TLS and says so.
	c.forwardedProto = "https"
	if ck := c.signInCookie(pageApproverToken, http.DefaultTransport); !ck.Secure {
		t.Errorf("behind a TLS proxy the sign-in cookie is not Secure: %+v", ck)
	}
	c.forwardedProto = ""

	// A sign-in ends after its time (here the page's own, on the test clock) and with sign-out.
	clock := &testClock{now: time.Now()}
	page := httpapi.NewApprovalsPage(f.reg, auth.NewAuthenticator(approvalsTokens()), httpapi.ApprovalsPageOptions{SignInTTL: time.Hour, Now: clock.Now})
	pageSrv := httptest.NewServer(page)
	t.Cleanup(pageSrv.Close)
	pc := newPageClient(t, pageSrv.URL, nil)
	if status, body := pc.signIn(pageApproverToken); status != http.StatusOK || !strings.Contains(body, `id="approver"`) {
		t.Fatalf("sign-in: %d", status)
	}
	clock.Advance(time.Hour)
	if _, body, _ := pc.get("/approvals"); strings.Contains(body, `id="approver"`) || !strings.Contains(body, `action="/approvals/signin"`) {
		t.Errorf("still signed in after the sign-in's time")
	}
	pc.signIn(pageApproverToken)
	_, list, _ := pc.get("/approvals")
	old := pc.cookie("pgtools_approvals")
	if status, body, _ := pc.post("/approvals/signout", url.Values{"csrf": {pc.csrf(list)}}); status != http.StatusOK || strings.Contains(body, `id="approver"`) || pc.cookie("pgtools_approvals") != nil {
		t.Errorf("sign-out: %d", status)
	}
	// The old id is gone from the server, not only from the browser; so is a made-up one.
	for _, id := range []string{old.Value, "x"} {
		req, _ := http.NewRequest(http.MethodGet, pageSrv.URL+"/approvals", nil)
		req.AddCookie(&http.Cookie{Name: "pgtools_approvals", Value: id})
		if status, body, _ := pc.do(req); status != http.StatusOK || strings.Contains(body, `id="approver"`) {
			t.Errorf("sign-in id %q is signed in after sign-out", id)
		}
	}
}

// TestApprovalsPageDecides is the page's walk against real PostgreSQL: a delete of 120 rows
// waits for approval; the approver sees who asked, where, what and its measured effect, with
// the request's text escaped; approves it, and the caller's re-call with approval_id commits
// the 120 deletes. Another request is denied (the re-call gets not_allowed), one of a
// credential that may approve is not shown to that credential and cannot be decided by it,
// and one that expired cannot be approved.
func TestApprovalsPageDecides(t *testing.T) {
	t.Parallel()
	f := newApprovalsFixture(t)
	const approveArgs = `{"table": "orders", "where": "total <= $1 /* <script>alert(1)</script> */", "params": [120], "autocommit": true}`
	toApprove := f.request(t, pageCallerToken, "delete_data", approveArgs)
	toDeny := f.request(t, pageCallerToken, "delete_data", deleteArgs(121, 240))
	own := f.request(t, aprSelfToken, "delete_data", deleteArgs(100, 250))
	if n := f.orders(t); n != 300 {
		t.Fatalf("a request changed rows: %d left", n)
	}
	f.clock.Advance(90 * time.Second)

	c := newPageClient(t, f.srv.URL, nil)
	status, list := c.signIn(pageApproverToken)
	if status != http.StatusOK {
		t.Fatalf("sign-in: %d\n%s", status, list)
	}
	card := func(page, id string) string {
		i := strings.Index(page, `<article class="request" id="`+id+`">`)
		if i < 0 {
			return ""
		}
		return page[i : i+strings.Index(page[i:], "</article>")]
	}
	a := card(list, toApprove)
	for _, want := range []string{`<dd class="caller">agent</dd>`, `<dd class="database">default</dd>`, "<td>public.orders</td>", `<td class="rows">120</td>`,
		`<td class="total">120</td>`, "Statements: DELETE", "1m30s ago", "writes that change more than 100 rows",
		"&lt;script&gt;alert(1)&lt;/script&gt;", `action="/approvals/` + toApprove + `"`, `value="approve"`, `value="deny"`} {
		if !strings.Contains(a, want) {
			t.Errorf("the request's card lacks %s:\n%s", want, a)
		}
	}
	if strings.Contains(list, "<script>") || card(list, toDeny) == "" || card(list, own) == "" {
		t.Fatalf("the list: an unescaped script, or a request missing:\n%s", list)
	}
	csrf := c.csrf(list)

	status, body, _ := c.post("/approvals/"+toApprove, url.Values{"decision": {"approve"}, "csrf": {csrf}})
	if status != http.StatusOK || !strings.Contains(body, "Approved "+toApprove) || card(body, toApprove) != "" {
		t.Fatalf("approve: %d\n%s", status, body)
	}
	status, body, _ = c.post("/approvals/"+toDeny, url.Values{"decision": {"deny"}, "csrf": {csrf}})
	if status != http.StatusOK || !strings.Contains(body, "Denied "+toDeny) || card(body, toDeny) != "" {
		t.Fatalf("deny: %d\n%s", status, body)
	}
	if status, body, _ = c.post("/approvals/"+toDeny, url.Values{"decision": {"approve"}, "csrf": {csrf}}); !strings.Contains(body, "is denied; only a pending request can be decided") {
		t.Errorf("approving a denied request: %d\n%s", status, body)
	}
	if status, body, _ = c.post("/approvals/"+toDeny, url.Values{"decision": {"maybe"}, "csrf": {csrf}}); status != http.StatusBadRequest {
		t.Errorf("decision maybe: %d", status)
	}

	status, out, _ := apitest.Call(t, http.MethodPost, f.srv.URL+"/v1/tools/delete_data", pageCallerToken, withApprovalID(approveArgs, toApprove))
	if status != http.StatusOK || out["affectedRows"] != float64(120) || f.orders(t) != 180 {
		t.Fatalf("the approved re-call: %d %v, %d rows left", status, out, f.orders(t))
	}
	status, out, _ = apitest.Call(t, http.MethodPost, f.srv.URL+"/v1/tools/delete_data", pageCallerToken, withApprovalID(deleteArgs(121, 240), toDeny))
	if status != http.StatusForbidden || out["errorType"] != "not_allowed" || f.orders(t) != 180 {
		t.Fatalf("the denied re-call: %d %v, %d rows left", status, out, f.orders(t))
	}

	// The credential that asked, though it holds the approve scope, neither sees nor decides it.
	self := newPageClient(t, f.srv.URL, nil)
	_, selfList := self.signIn(aprSelfToken)
	if card(selfList, own) != "" || !strings.Contains(selfList, `id="empty"`) {
		t.Errorf("the asking credential is shown its own request:\n%s", selfList)
	}
	if _, body, _ = self.post("/approvals/"+own, url.Values{"decision": {"approve"}, "csrf": {self.csrf(selfList)}}); !strings.Contains(body, "the credential that asks cannot approve") {
		t.Errorf("self-approval:\n%s", body)
	}

	// Past the store's TTL the request is expired: approving it from a page loaded before fails
	// with the reason, and it is no longer listed.
	f.clock.Advance(15 * time.Minute)
	status, body, _ = c.post("/approvals/"+own, url.Values{"decision": {"approve"}, "csrf": {csrf}})
	if status != http.StatusOK || !strings.Contains(body, `class="error"`) || !strings.Contains(body, "is expired") || card(body, own) != "" {
		t.Errorf("approving an expired request: %d\n%s", status, body)
	}
	if ap, _ := f.store.Get(tools.Principal{Name: "boss", Scopes: []string{"approve"}}.Party(), own); ap.Status != approval.Expired {
		t.Errorf("the expired request is %s", ap.Status)
	}
	if n := f.orders(t); n != 180 {
		t.Errorf("%d rows left, want 180", n)
	}
}

func withApprovalID(args, id string) string {
	return strings.TrimSuffix(strings.TrimSpace(args), "}") + `, "approval_id": "` + id + `"}`
}

// TestApprovalsPageJWT: a JWT bearer token signs in through the same check as on the API: a
// valid one without the approve scope is refused for that reason, a stale one as not accepted.
func TestApprovalsPageJWT(t *testing.T) {
	t.Parallel()
	iss := authtest.NewIssuer(t)
	f := runnertest.NewJWTFixture(t, auth.JWTConfig{Issuer: authtest.Issuer, Audience: authtest.Audience, JWKSURL: iss.URL()})
	good := authtest.ValidClaims("alice", f.Role)
	c := newPageClient(t, f.Srv.URL, nil)
	status, body := c.signIn(authtest.Sign(t, jwt.SigningMethodRS256, "rsa-1", iss.RSA, good))
	if status != http.StatusForbidden || !strings.Contains(body, "alice") || !strings.Contains(body, "lacks the approve scope") || c.cookie("pgtools_approvals") != nil {
		t.Errorf("a caller's JWT: %d\n%s", status, body)
	}
	stale := authtest.Sign(t, jwt.SigningMethodRS256, "rsa-1", iss.RSA, authtest.With(good, "exp", time.Now().Add(-2*time.Minute).Unix()))
	if status, body = c.signIn(stale); status != http.StatusUnauthorized || !strings.Contains(body, "does not accept that token") {
		t.Errorf("an expired JWT: %d\n%s", status, body)
	}
	if strings.Contains(f.Log.String(), stale[:40]) {
		t.Errorf("the log holds the JWT")
	}
}
