package invoke_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/invoke"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/tools/pgtest"
)

// TestBeginAnswerNamesTheRoutingHeader: over HTTP, pg_tx begin's hint tells the caller to send
// the session id as X-PgTools-Session, and no other answer gets that sentence.
func TestBeginAnswerNamesTheRoutingHeader(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	const tok = "token-route-hint-0123456789"
	cfg := &config.Config{Databases: map[string]config.DatabaseConfig{"default": {URL: db.RoleDSN(t, "route")}},
		Tokens: []auth.Token{{Secret: tok, Name: "a", Scopes: []string{"read", "write"}}}}
	f := runnertest.NewServerFixture(t, cfg)
	status, body, _ := f.Call(t, tok, "pg_tx", `{"action":"begin","read_only":true}`)
	id, _ := body["session_id"].(string)
	if hint := fmt.Sprint(body["hint"]); status != 200 || id == "" || !strings.HasSuffix(hint, " Behind a load balancer with several replicas, send the HTTP header "+invoke.SessionHeader+": "+id+
		" with every call of this session so it reaches the replica holding it.") {
		t.Fatalf("begin: %d %v", status, body)
	}
	status, body, _ = f.Call(t, tok, "pg_tx", fmt.Sprintf(`{"action":"savepoint","name":"a","session_id":%q}`, id))
	if hint := fmt.Sprint(body["hint"]); status != 200 || strings.Contains(hint, invoke.SessionHeader) {
		t.Fatalf("savepoint: %d %v", status, body)
	}
}
