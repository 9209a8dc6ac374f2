package httpapi

import (
	"encoding/base64"
	"testing"
	"time"
)

// TestJWTExpiry: a JWT's exp ends an approver's sign-in; anything that is not a JWT with an exp
// leaves the page's own time.
func TestJWTExpiry(t *testing.T) {
	seg := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	hdr := seg(`{"alg":"RS256"}`)
	for _, tc := range []struct {
		token string
		want  int64 // 0: none
	}{
		{hdr + "." + seg(`{"sub":"a","exp":1795000000}`) + ".sig", 1795000000},
		{hdr + "." + seg(`{"sub":"a","exp":1795000000.5}`) + ".sig", 1795000000},
		{hdr + "." + seg(`{"sub":"a"}`) + ".sig", 0},
		{hdr + "." + seg(`{"exp":"soon"}`) + ".sig", 0},
		{hdr + ".%%%.sig", 0},
		{"plain-api-token-0123456789", 0},
		{"a.b", 0},
	} {
		got, ok := jwtExpiry(tc.token)
		if ok != (tc.want != 0) || ok && got.Unix() != tc.want {
			t.Errorf("jwtExpiry(%q) = %v %v, want %d", tc.token, got, ok, tc.want)
		}
	}
}

// TestRoundDuration pins how the page prints ages and times left.
func TestRoundDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "0s", 400 * time.Millisecond: "0s", 45 * time.Second: "45s", 90 * time.Second: "1m30s",
		10 * time.Minute: "10m", 8 * time.Hour: "8h", time.Hour + 5*time.Minute + 40*time.Second: "1h6m",
	} {
		if got := roundDuration(d); got != want {
			t.Errorf("roundDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestAgo(t *testing.T) {
	if got := ago(300 * time.Millisecond); got != "just now" {
		t.Errorf("ago(300ms) = %q", got)
	}
	if got := ago(90 * time.Second); got != "1m30s ago" {
		t.Errorf("ago(90s) = %q", got)
	}
}
