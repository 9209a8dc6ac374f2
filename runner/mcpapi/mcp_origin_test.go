package mcpapi

import (
	"net/http/httptest"
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
