package mcpapi

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// TestOriginPolicy: entries that are not origins allow nothing and are named in the error; the
// others are compared without case or default port.
func TestOriginPolicy(t *testing.T) {
	t.Parallel()
	p, err := newOriginPolicy([]string{"https://App.example.com:443", "*", "https://*.example.com", "http://x:1:2", "null", "http://localhost:3000"})
	if err == nil {
		t.Fatal("no error for entries that are not origins")
	}
	for origin, want := range map[string]bool{
		"https://app.example.com": true, "http://localhost:3000": true, "http://LOCALHOST:3000": true,
		"https://evil.example": false, "https://a.example.com": false, "http://x:1:2": false, "null": false, "*": false,
		"https://app.example.com/": true, "https://app.example.com/x": false, "https://user@app.example.com": false,
	} {
		r := httptest.NewRequest("POST", "http://pgtools.internal:8080/mcp", nil)
		r.Header.Set("Origin", origin)
		if got := p.check(r) == ""; got != want {
			t.Errorf("Origin %q: allowed %v, want %v", origin, got, want)
		}
	}
	r := httptest.NewRequest("POST", "http://pgtools.internal:8080/mcp", nil)
	r.Header.Set("Origin", "http://pgtools.internal:8080")
	if why := p.check(r); why != "" {
		t.Errorf("the page's own host is refused: %s", why)
	}
}

// TestOriginSameHostNeedsSameScheme: the request's own host is accepted only with the scheme
// the listener speaks. A page served over https is another origin than the plain-HTTP listener
// at the same host and port (and the other way round), so each is refused, over a real plain
// and a real TLS listener.
func TestOriginSameHostNeedsSameScheme(t *testing.T) {
	t.Parallel()
	p, err := newOriginPolicy(nil)
	if err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if why := p.check(r); why != "" {
			http.Error(w, why, http.StatusForbidden)
		}
	})
	for _, tc := range []struct {
		name string
		srv  *httptest.Server
	}{{"plain", httptest.NewServer(h)}, {"tls", httptest.NewTLSServer(h)}} {
		t.Cleanup(tc.srv.Close)
		u, _ := url.Parse(tc.srv.URL)
		other := map[string]string{"http": "https", "https": "http"}[u.Scheme]
		for origin, want := range map[string]int{
			u.Scheme + "://" + u.Host: http.StatusOK,
			other + "://" + u.Host:    http.StatusForbidden,
		} {
			req, _ := http.NewRequest("POST", tc.srv.URL+"/mcp", nil)
			req.Header.Set("Origin", origin)
			resp, err := tc.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("%s listener, Origin %s: %d, want %d", tc.name, origin, resp.StatusCode, want)
			}
		}
	}
}
