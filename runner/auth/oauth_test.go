package auth_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/auth/authtest"
	"github.com/pgtools/pgtools/runner/runnertest"
)

// TestMCPOAuthResourceServer: the protected-resource metadata (RFC 9728), the 401 challenge
// naming it, and access tokens verified with the resource as their audience on /mcp only.
func TestMCPOAuthResourceServer(t *testing.T) {
	t.Parallel()
	f := runnertest.NewIdentityFixture(t)
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		resp, err := http.Get(f.Srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var meta map[string]any
		if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &meta) != nil {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, raw)
		}
		if meta["resource"] != runnertest.MCPResource || !strings.Contains(string(raw), `"authorization_servers":["`+authtest.Issuer+`"]`) ||
			!strings.Contains(string(raw), `"bearer_methods_supported":["header"]`) || !strings.Contains(string(raw), `"scopes_supported":["read","write"]`) {
			t.Errorf("%s: metadata %s", path, raw)
		}
	}
	mcpCall := `{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "execute_sql", "arguments": {"sql": "SELECT current_user AS u"}}}`
	post := func(token string) (int, string, http.Header) {
		status, raw, hdr := apitest.MCPPost(t, f.Srv.URL, token, mcpCall)
		return status, string(raw), hdr
	}
	wantChallenge := `Bearer resource_metadata="https://pgtools.test.invalid/.well-known/oauth-protected-resource/mcp"`
	if status, _, hdr := post(""); status != http.StatusUnauthorized || hdr.Get("WWW-Authenticate") != wantChallenge {
		t.Errorf("no token on /mcp: %d, challenge %q, want %q", status, hdr.Get("WWW-Authenticate"), wantChallenge)
	}
	// A token for the HTTP API's audience is not an access token for /mcp.
	if status, body, _ := post(f.TenantToken(t, "alice", "a")); status != http.StatusUnauthorized || !strings.Contains(body, "another audience") {
		t.Errorf("API-audience token on /mcp: %d %s", status, body)
	}
	access := authtest.Sign(t, jwt.SigningMethodRS256, "rsa-1", f.Iss.RSA, authtest.With(authtest.ValidClaims("alice", f.Role), "aud", runnertest.MCPResource+"/"))
	status, body, _ := post(access)
	if status != http.StatusOK || !strings.Contains(body, `\"u\":\"`+f.Role+`\"`) {
		t.Errorf("access token on /mcp: %d %s", status, body)
	}
	// ...and not a token for the HTTP API, whose audience is jwt.audience.
	if status, body, _ := f.Post(t, "/v1/tools/select_query", access, `{"table": "probe"}`); status != http.StatusUnauthorized {
		t.Errorf("MCP access token on the HTTP API: %d %v", status, body)
	}
	// The HTTP API keeps its own challenge.
	if _, _, hdr := f.Post(t, "/v1/tools/select_query", "", `{}`); !strings.HasPrefix(hdr.Get("WWW-Authenticate"), `Bearer realm=`) {
		t.Errorf("HTTP API challenge %q", hdr.Get("WWW-Authenticate"))
	}
}
