package httpapi_test

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pgtools/pgtools/runner/apitest"
)

// fromAddress is a transport whose connections leave from the loopback address ip: another
// client, as far as the server can tell.
func fromAddress(ip string) http.RoundTripper {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}
}

// TestSignInFailuresLimited: 30 wrong sign-ins on /approvals from one client within a second
// are each answered 401; the 31st is refused with 429 and Retry-After without the token being
// checked, and so is the right token from that client, and the same wrong token from another
// client (it is counted per credential too). The right token from another client still signs in.
func TestSignInFailuresLimited(t *testing.T) {
	t.Parallel()
	f := newApprovalsFixture(t)
	a := newPageClient(t, f.srv.URL, fromAddress("127.0.0.1"))
	_, form, _ := a.get("/approvals")
	csrf := a.csrf(form)
	try := func(c *pageClient, token string) (int, string, http.Header) {
		status, body, h := c.post("/approvals/signin", url.Values{"token": {token}, "csrf": {csrf}})
		if strings.Contains(body, `name="csrf"`) {
			csrf = c.csrf(body)
		}
		return status, body, h
	}
	start := time.Now()
	for i := 1; i <= 30; i++ {
		if status, body, _ := try(a, "wrong-token-of-the-test-0000"); status != http.StatusUnauthorized {
			t.Fatalf("wrong sign-in %d: %d %.200s", i, status, body)
		}
	}
	status, body, h := try(a, "wrong-token-of-the-test-0000")
	if took := time.Since(start); took > 900*time.Millisecond {
		t.Logf("31 sign-ins took %v: the window may have ended", took)
	}
	if status != http.StatusTooManyRequests || h.Get("Retry-After") != "1" || !strings.Contains(body, "Too many failed sign-ins") {
		t.Fatalf("the 31st wrong sign-in: %d Retry-After %q %.300s", status, h.Get("Retry-After"), body)
	}
	if status, _, _ := try(a, pageApproverToken); status != http.StatusTooManyRequests {
		t.Errorf("the right token from the limited client: %d, want 429", status)
	}
	b := newPageClient(t, f.srv.URL, fromAddress("127.0.0.2"))
	_, form, _ = b.get("/approvals")
	csrf = b.csrf(form)
	if status, _, _ := try(b, "wrong-token-of-the-test-0000"); status != http.StatusTooManyRequests {
		t.Errorf("the limited wrong token from another client: %d, want 429", status)
	}
	if status, body := b.signIn(pageApproverToken); status != http.StatusOK || !strings.Contains(body, "boss") {
		t.Errorf("the right token from another client: %d %.300s", status, body)
	}
	if strings.Contains(f.log.String(), "wrong-token-of-the-test") {
		t.Error("a tried secret reached the log")
	}
}

// TestAPIAuthFailuresLimited: the approvals API (like every bearer route) answers 30 wrong
// tokens from a client in a second with 401 and the 31st with 429 rate_limited, Retry-After and
// a suggestion; an approver's own calls are bounded per credential too.
func TestAPIAuthFailuresLimited(t *testing.T) {
	t.Parallel()
	f := newApprovalsFixture(t)
	for i := 1; i <= 30; i++ {
		if status, out, _ := apitest.Call(t, http.MethodGet, f.srv.URL+"/v1/approvals", "wrong-api-token-0000000000", ""); status != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d %v", i, status, out)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/v1/approvals", nil)
	req.Header.Set("Authorization", "Bearer wrong-api-token-0000000000")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("the 31st wrong token: %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	time.Sleep(1100 * time.Millisecond) // the window ends
	limited := 0
	for range 40 {
		status, out, _ := apitest.Call(t, http.MethodGet, f.srv.URL+"/v1/approvals", pageApproverToken, "")
		switch {
		case status == http.StatusTooManyRequests && out["errorType"] == "rate_limited" && out["suggestion"] != "":
			limited++
		case status != http.StatusOK:
			t.Fatalf("an approver's call: %d %v", status, out)
		}
	}
	if limited == 0 {
		t.Error("40 approvals API calls of one approver in about a second were all answered")
	}
}

// TestApprovalsPageRefusesRepeatedFields: a form that names a field twice
// (decision=deny&decision=approve) reads one way to a reader that keeps the first and another
// to one that keeps the last; the page refuses it and decides nothing.
func TestApprovalsPageRefusesRepeatedFields(t *testing.T) {
	t.Parallel()
	f := newApprovalsFixture(t)
	id := f.request(t, pageCallerToken, "delete_data", deleteArgs(1, 150))
	c := newPageClient(t, f.srv.URL, nil)
	status, page := c.signIn(pageApproverToken)
	if status != http.StatusOK {
		t.Fatalf("sign-in: %d", status)
	}
	csrf := c.csrf(page)
	for _, form := range []url.Values{
		{"decision": {"deny", "approve"}, "csrf": {csrf}},
		{"decision": {"approve"}, "csrf": {csrf, csrf}},
	} {
		if status, body, _ := c.post("/approvals/"+id, form); status != http.StatusBadRequest || !strings.Contains(body, "more than once") {
			t.Errorf("form %v: %d %.300s", form, status, body)
		}
	}
	if status, out, _ := apitest.Call(t, http.MethodGet, f.srv.URL+"/v1/approvals/"+id, pageApproverToken, ""); status != http.StatusOK || out["approval"].(map[string]any)["status"] != "pending" {
		t.Errorf("after the refused forms: %d %v, want pending", status, out)
	}
}
