package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/session"
	"github.com/pgtools/pgtools/tools/toolstest"

	"github.com/pgtools/pgtools/tools/pgtest"
)

var uuidV4RE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestReplicaTaggedIDs: every session id of a replica starts with its tag and is still a UUIDv4
// (the tool schemas require one), the rest stays random, and a tag of 8 hex digits is taken as is.
func TestReplicaTaggedIDs(t *testing.T) {
	t.Parallel()
	if got := session.ReplicaTag("0000000A"); got != "0000000a" {
		t.Fatalf("ReplicaTag of 8 hex digits: %q", got)
	}
	if a, b := session.ReplicaTag("pgtools-0"), session.ReplicaTag("pgtools-1"); a == b || len(a) != 8 || a != session.ReplicaTag("pgtools-0") {
		t.Fatalf("ReplicaTag not a stable 8-digit hash: %q %q", a, b)
	}
	f := newFixture(t, session.Config{ReplicaID: "pgtools-0", MaxSessions: 4}, tools.Policy{})
	seen := map[string]bool{}
	for range 3 {
		id := f.begin(t, alice, "")
		if !uuidV4RE.MatchString(id) || session.TagOf(id) != session.ReplicaTag("pgtools-0") || seen[id[9:]] {
			t.Fatalf("session id %q: want a UUIDv4 starting with %s and a random rest", id, session.ReplicaTag("pgtools-0"))
		}
		seen[id[9:]] = true
	}
}

// TestForeignReplicaSession: a replica receiving a session another replica opened answers
// session_not_found naming the other replica's tag and the routing header, while the replica
// holding it serves it. Two managers over one database stand for two replicas.
func TestForeignReplicaSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{ReplicaID: "replica-a"}, tools.Policy{})
	other := session.New(session.Config{ReplicaID: "replica-b"})
	t.Cleanup(func() { other.Close(context.Background()) })
	regB := toolstest.RegistryWith(t, f.db.RoleDSN(t, "sess"), tools.Policy{}, 2, tools.Options{Sessions: other})

	id := f.begin(t, alice, "")
	_, _, e := regB.Call(context.Background(), alice, "select_query", []byte(fmt.Sprintf(`{"table":"accounts","session_id":%q}`, id)))
	if e == nil || e.Type != tools.ErrSessionNotFound {
		t.Fatalf("foreign session on replica b: %v", e)
	}
	for _, want := range []string{"another replica (tag " + session.ReplicaTag("replica-a") + ")", `replica "replica-b"`, "X-PgTools-Session: " + id} {
		if !strings.Contains(e.Message+" "+e.Suggestion, want) {
			t.Errorf("answer lacks %q: %s / %s", want, e.Message, e.Suggestion)
		}
	}
	checkGolden(t, "session_not_found-other-replica", e)
	// The holder still serves it: the foreign attempt touched nothing.
	f.must(t, alice, "select_query", fmt.Sprintf(`{"table":"accounts","session_id":%q}`, id))
	// An unknown id of this replica's own tag is the plain session_not_found.
	own := session.ReplicaTag("replica-a") + id[8:len(id)-1] + "0"
	if own == id {
		own = session.ReplicaTag("replica-a") + id[8:len(id)-1] + "1"
	}
	if e := f.fail(t, tools.ErrSessionNotFound, alice, "select_query", fmt.Sprintf(`{"table":"accounts","session_id":%q}`, own)); strings.Contains(e.Message, "another replica") {
		t.Fatalf("own tag reported as foreign: %s", e.Message)
	}
}

// checkGolden compares e, ids replaced, with testdata/name.golden (-update rewrites it).
func checkGolden(t *testing.T, name string, e *tools.Error) {
	t.Helper()
	raw, err := e.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := json.Indent(&got, uuidRE.ReplaceAll(raw, []byte("<session-id>")), "", "  "); err != nil {
		t.Fatal(err)
	}
	got.WriteByte('\n')
	pgtest.Golden(t, filepath.Join("testdata", name+".golden"), got.Bytes(), *update)
}

// TestRestartedReplicaAnswersLost: a replica that restarted (a new manager with the same
// replica id, over the same database) answers a session id it minted before the restart as
// lost and rolled back, with begin again as the fix — not as an unknown id with a hint to route
// the call to the replica it already reached. An id it never minted stays session_not_found.
func TestRestartedReplicaAnswersLost(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{ReplicaID: "replica-a"}, tools.Policy{})
	id := f.begin(t, alice, "")
	f.must(t, alice, "insert_data", fmt.Sprintf(`{"table":"accounts","row":{"id":9,"owner":"dan","balance":1},"session_id":%q}`, id))
	f.mgr.Close(context.Background()) // the replica stops: its sessions are rolled back

	restarted := session.New(session.Config{ReplicaID: "replica-a"})
	for restarted.Boot() == f.mgr.Boot() { // one chance in 65536: the boots would look alike
		restarted = session.New(session.Config{ReplicaID: "replica-a"})
	}
	t.Cleanup(func() { restarted.Close(context.Background()) })
	if restarted.Tag() != f.mgr.Tag() {
		t.Fatalf("the restarted replica has tag %s, want %s", restarted.Tag(), f.mgr.Tag())
	}
	reg := toolstest.RegistryWith(t, f.db.RoleDSN(t, "sess"), tools.Policy{}, 2, tools.Options{Sessions: restarted})
	_, _, e := reg.Call(context.Background(), alice, "select_query", []byte(fmt.Sprintf(`{"table":"accounts","session_id":%q}`, id)))
	if e == nil || e.Type != tools.ErrConnection {
		t.Fatalf("a session of the replica's earlier run: %+v, want connection_error (lost)", e)
	}
	for _, want := range []string{"was lost", "restarted", "rolled back", `"replica-a"`} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("message lacks %q: %s", want, e.Message)
		}
	}
	if !strings.Contains(e.Suggestion, `pg_tx {"action":"begin"}`) || strings.Contains(e.Suggestion, "X-PgTools-Session") {
		t.Errorf("suggestion should say begin again, not route: %s", e.Suggestion)
	}
	checkGolden(t, "session_lost-replica-restarted", e)
	if f.db.QueryInt(t, "SELECT count(*) FROM accounts WHERE id = 9") != 0 {
		t.Fatal("the session's insert survived the replica's stop")
	}
	// An id this run minted and ended, and one nobody minted, are plain session_not_found.
	out, _, e := reg.Call(context.Background(), alice, "pg_tx", []byte(`{"action":"begin"}`))
	if e != nil {
		t.Fatalf("begin on the restarted replica: %s", e.Message)
	}
	raw, _ := out.MarshalJSON()
	var began struct {
		ID string `json:"session_id"`
	}
	if err := json.Unmarshal(raw, &began); err != nil || session.TagOf(began.ID) != f.mgr.Tag() || began.ID[9:13] == id[9:13] {
		t.Fatalf("the restarted replica's id %q: want tag %s and another boot group than %q", began.ID, f.mgr.Tag(), id)
	}
	unknown := began.ID[:len(began.ID)-1] + map[bool]string{true: "1", false: "0"}[strings.HasSuffix(began.ID, "0")]
	_, _, e = reg.Call(context.Background(), alice, "select_query", []byte(fmt.Sprintf(`{"table":"accounts","session_id":%q}`, unknown)))
	if e == nil || e.Type != tools.ErrSessionNotFound || strings.Contains(e.Message, "lost") {
		t.Fatalf("an id of this run nobody minted: %+v, want session_not_found", e)
	}
}
