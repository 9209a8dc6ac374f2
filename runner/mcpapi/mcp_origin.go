package mcpapi

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// A browser sends Origin with every cross-site request a page makes; a page on another site that
// reaches /mcp (through DNS rebinding, or with a token it found) must not get to call tools, so
// the spec asks servers to validate Origin. Clients that are not browsers send none, and a
// request without Origin is not a browser's cross-site request: it passes.

// originPolicy decides which Origin headers /mcp accepts: the request's own host, and the
// origins of the allow-list (config mcp.allowed_origins). The own host counts only in the
// listener's own scheme.
type originPolicy struct {
	allowed map[string]bool // canonical origins: scheme://host[:port], default ports dropped
}

// newOriginPolicy returns the policy for allowed, a list of origins (scheme://host[:port]), and
// an error naming each entry that is not an origin. Such an entry allows nothing (a wildcard
// never opens everything); the config schema refuses most of them before they get here.
func newOriginPolicy(allowed []string) (originPolicy, error) {
	p := originPolicy{allowed: map[string]bool{}}
	var bad []string
	for _, o := range allowed {
		c, ok := canonicalOrigin(o)
		if !ok {
			bad = append(bad, fmt.Sprintf("%q", o))
			continue
		}
		p.allowed[c] = true
	}
	if bad != nil {
		return p, fmt.Errorf("mcp.allowed_origins: %s not an origin (scheme://host[:port], e.g. https://app.example.com); ignored", strings.Join(bad, ", "))
	}
	return p, nil
}

// check reports why r's Origin is refused, or "" when it is accepted.
func (p originPolicy) check(r *http.Request) string {
	vals := r.Header.Values("Origin")
	if len(vals) == 0 {
		return ""
	}
	if len(vals) > 1 {
		return "more than one Origin header"
	}
	origin, ok := canonicalOrigin(vals[0])
	if !ok {
		return fmt.Sprintf("invalid Origin header %q", vals[0])
	}
	if p.allowed[origin] {
		return ""
	}
	// The page's own origin is this listener's scheme with the Host the request named: the
	// same host and port spoken in the other scheme is another origin (a page served over
	// https to a plain-HTTP listener's host, or the other way round), refused like any other.
	// Behind a proxy that terminates TLS, list the public https origin in mcp.allowed_origins.
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	u, _ := url.Parse(origin)
	if u.Scheme == scheme && strings.EqualFold(u.Host, hostWithoutDefaultPort(r.Host, scheme)) {
		return "" // the page was served by this same listener
	}
	return fmt.Sprintf("invalid Origin header %q", vals[0])
}

// canonicalOrigin returns o as scheme://host[:port] in lower case without a default port, or
// false when o is not an origin ("null", a path, user info, a query, a wildcard).
func canonicalOrigin(o string) (string, bool) {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(u.Host, "*") {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	return scheme + "://" + strings.ToLower(hostWithoutDefaultPort(u.Host, scheme)), true
}

// hostWithoutDefaultPort drops :80 from an http host and :443 from an https one.
func hostWithoutDefaultPort(host, scheme string) string {
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		return host
	}
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		if strings.Contains(h, ":") {
			return "[" + h + "]"
		}
		return h
	}
	return host
}
