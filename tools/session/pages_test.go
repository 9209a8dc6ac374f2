package session_test

import (
	"fmt"
	"testing"

	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/session"
)

// TestPagesInsideASession: select_query pages with next_page inside a session, reading the
// session's own uncommitted rows, and continues exactly after the last row sent.
func TestPagesInsideASession(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{MaxSessions: 2}, tools.Policy{})
	id := f.begin(t, alice, "")
	f.must(t, alice, "insert_data", `{"table":"accounts","session_id":"`+id+`","rows":[{"id":4,"owner":"dan","balance":1},{"id":5,"owner":"eve","balance":2}]}`)
	var owners []string
	out := f.must(t, alice, "select_query", `{"table":"accounts","session_id":"`+id+`","order_by":"owner desc","limit":2}`)
	for {
		for _, r := range out["data"].([]any) {
			owners = append(owners, r.(map[string]any)["owner"].(string))
		}
		if out["truncated"] != true {
			break
		}
		out = f.must(t, alice, "select_query", `{"session_id":"`+id+`","page_token":"`+out["next_page"].(string)+`"}`)
	}
	if fmt.Sprint(owners) != "[eve dan cat ben ann]" {
		t.Fatalf("pages read %v", owners)
	}
	f.must(t, alice, "pg_tx", `{"action":"rollback","session_id":"`+id+`"}`)
}
