package forward_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner"
	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/forward"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/session"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var secret = []byte("0123456789abcdef0123456789abcdef-fleet")

// static is a Locator the test sets: tag → address and liveness.
type static struct {
	mu   sync.Mutex
	addr map[string]string
	live map[string]bool
}

func (s *static) Owner(_ context.Context, tag string) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.addr[tag]
	if !ok {
		return "", false, forward.ErrUnknownTag
	}
	return a, s.live[tag], nil
}

func (s *static) Live(context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 1
	for _, l := range s.live {
		if l {
			n++
		}
	}
	return n, nil
}

func (s *static) set(tag, addr string, live bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addr[tag], s.live[tag] = addr, live
}

// replica is one runtime of a test fleet behind an httptest server.
type replica struct {
	rt  *runner.Runtime
	srv *httptest.Server
	tag string
	loc *static
	log *pgtest.SyncBuffer
}

// newFleet builds n replicas on dsn, each knowing the others through a static locator.
func newFleet(t *testing.T, dsn string, n int) []*replica {
	return newFleetWith(t, dsn, n, nil)
}

func newFleetWith(t testing.TB, dsn string, n int, change func(*config.Config)) []*replica {
	t.Helper()
	ids := []string{"aaaaaaaa", "bbbbbbbb", "cccccccc"}[:n]
	out := make([]*replica, n)
	for i, id := range ids {
		cfg := &config.Config{Listen: "127.0.0.1:0", ReplicaID: id, Tokens: runnertest.MCPTokens(),
			Databases: map[string]config.DatabaseConfig{"default": {URL: dsn}}}
		if change != nil {
			change(cfg)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		cfg.Fleet.Secret = secret
		loc := &static{addr: map[string]string{}, live: map[string]bool{}}
		logs := &pgtest.SyncBuffer{}
		rt, err := runner.Build(context.Background(), cfg, zerolog.New(logs), runner.BuildOptions{Locator: loc, FleetInterval: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(rt.Handler())
		t.Cleanup(func() { srv.Close(); rt.Close() })
		out[i] = &replica{rt: rt, srv: srv, tag: session.ReplicaTag(id), loc: loc, log: logs}
	}
	for _, r := range out {
		for _, o := range out {
			if o != r {
				r.loc.set(o.tag, o.srv.URL, true)
			}
		}
	}
	return out
}

func newFleetB(b *testing.B, dsn string) []*replica { return newFleetWith(b, dsn, 2, nil) }

func callB(b *testing.B, r *replica, body, tool string) (int, map[string]any) {
	b.Helper()
	st, out, _ := apitest.Call(b, http.MethodPost, r.srv.URL+"/v1/tools/"+tool, runnertest.AgentToken, body)
	return st, out
}

func writableDB(t *testing.T) (*pgtest.DB, string) {
	db, dsn := runnertest.SetupDB(t)
	db.Exec(t, `GRANT INSERT, UPDATE, DELETE ON orders TO "`+db.RoleName("api")+`"`)
	return db, dsn
}

func call(t *testing.T, r *replica, token, tool, body string) (int, map[string]any) {
	t.Helper()
	st, out, _ := apitest.Call(t, http.MethodPost, r.srv.URL+"/v1/tools/"+tool, token, body)
	return st, out
}

func rawCall(t *testing.T, r *replica, token, tool, body string) (int, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(apitest.Request(http.MethodPost, r.srv.URL+"/v1/tools/"+tool, token, body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// A session begun on A continues through B and C without any routing header: insert and
// commit run on A, the row is committed once, and each answer is A's.
func TestForwardedSessionCommits(t *testing.T) {
	db, dsn := writableDB(t)
	fl := newFleet(t, dsn, 3)
	a, b, c := fl[0], fl[1], fl[2]
	st, out := call(t, a, runnertest.AgentToken, "pg_tx", `{"action":"begin"}`)
	if st != 200 {
		t.Fatalf("begin: %d %v", st, out)
	}
	id := out["session_id"].(string)
	if !strings.HasPrefix(id, a.tag+"-") {
		t.Fatalf("session %s does not start with A's tag %s", id, a.tag)
	}
	st, out = call(t, b, runnertest.AgentToken, "insert_data", `{"table":"orders","row":{"id":100,"status":"new"},"session_id":"`+id+`"}`)
	if st != 200 || out["affectedRows"] != float64(1) {
		t.Fatalf("insert through B: %d %v", st, out)
	}
	if n := db.QueryInt(t, `SELECT count(*) FROM orders WHERE id = 100`); n != 0 {
		t.Fatalf("the insert is visible before commit: %d", n)
	}
	st, out = call(t, c, runnertest.AgentToken, "pg_tx", `{"action":"commit","session_id":"`+id+`"}`)
	if st != 200 {
		t.Fatalf("commit through C: %d %v", st, out)
	}
	if n := db.QueryInt(t, `SELECT count(*) FROM orders WHERE id = 100`); n != 1 {
		t.Fatalf("rows after commit: %d", n)
	}
	// The session is gone on A: a further call through B gets A's answer for an ended session.
	st, out = call(t, b, runnertest.AgentToken, "select_query", `{"table":"orders","session_id":"`+id+`"}`)
	if st != 404 || out["errorType"] != "session_not_found" {
		t.Fatalf("after commit: %d %v", st, out)
	}
	if !strings.Contains(a.log.String(), `"transport":"fleet"`) {
		t.Fatalf("A logged no forwarded call:\n%s", a.log.String())
	}
}

// A forwarded answer is the owner's, byte for byte: an error answered through B equals the
// same error answered by A directly.
func TestForwardedAnswerUnchanged(t *testing.T) {
	_, dsn := writableDB(t)
	fl := newFleet(t, dsn, 2)
	a, b := fl[0], fl[1]
	_, out := call(t, a, runnertest.AgentToken, "pg_tx", `{"action":"begin"}`)
	id := out["session_id"].(string)
	body := `{"sql":"SELECT nope FROM orders","session_id":"` + id + `"}`
	stA, direct := rawCall(t, a, runnertest.AgentToken, "execute_sql", body)
	stB, via := rawCall(t, b, runnertest.AgentToken, "execute_sql", body)
	if stA != stB || !bytes.Equal(direct, via) || stA != 400 {
		t.Fatalf("direct %d %s\nforwarded %d %s", stA, direct, stB, via)
	}
	// A result: the same rows, keys and session echo; only executionTime differs.
	read := `{"table":"orders","order_by":"id","session_id":"` + id + `"}`
	_, direct = rawCall(t, a, runnertest.AgentToken, "select_query", read)
	_, via = rawCall(t, b, runnertest.AgentToken, "select_query", read)
	if dropTiming(t, direct) != dropTiming(t, via) {
		t.Fatalf("direct %s\nforwarded %s", direct, via)
	}
}

func dropTiming(t *testing.T, b []byte) string {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "executionTime")
	if s, ok := m["active_session"].(map[string]any); ok {
		delete(s, "expires_in")
		delete(s, "idle")
	}
	out, _ := json.Marshal(m)
	return string(out)
}

// The owner runs a forwarded call as the caller, never as anyone else: another token cannot
// reach A's session through B, and a read-only token cannot write in it.
func TestForwardKeepsTheCaller(t *testing.T) {
	_, dsn := writableDB(t)
	fl := newFleet(t, dsn, 2)
	a, b := fl[0], fl[1]
	_, out := call(t, a, runnertest.AgentToken, "pg_tx", `{"action":"begin"}`)
	id := out["session_id"].(string)
	st, out := call(t, b, runnertest.WriteToken, "insert_data", `{"table":"orders","row":{"id":101},"session_id":"`+id+`"}`)
	if st != 404 || out["errorType"] != "session_not_found" || !strings.Contains(out["error"].(string), "No open session") {
		t.Fatalf("another token's call in the session: %d %v", st, out)
	}
	st, out = call(t, b, runnertest.ReadToken, "insert_data", `{"table":"orders","row":{"id":101},"session_id":"`+id+`"}`)
	if st != 403 {
		t.Fatalf("a read token's write: %d %v", st, out)
	}
}

// A dead owner's session is answered as lost and rolled back, with "begin again"; an unknown
// tag keeps the answer of a replica that does not hold the session.
func TestDeadOwnerAndUnknownTag(t *testing.T) {
	_, dsn := writableDB(t)
	fl := newFleet(t, dsn, 2)
	a, b := fl[0], fl[1]
	_, out := call(t, a, runnertest.AgentToken, "pg_tx", `{"action":"begin"}`)
	id := out["session_id"].(string)

	b.loc.set(a.tag, a.srv.URL, false) // the registry says A is not live
	st, out := call(t, b, runnertest.AgentToken, "pg_tx", `{"action":"commit","session_id":"`+id+`"}`)
	if st != 503 || out["errorType"] != "connection_error" || !strings.Contains(out["error"].(string), "was lost") ||
		!strings.Contains(out["error"].(string), "rolled its transaction back") || !strings.Contains(out["suggestion"].(string), "Begin again") {
		t.Fatalf("not live: %d %v", st, out)
	}

	// A live entry whose address refuses connections: lost too.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	b.loc.set(a.tag, deadURL, true)
	st, out = call(t, b, runnertest.AgentToken, "select_query", `{"table":"orders","session_id":"`+id+`"}`)
	if st != 503 || out["errorType"] != "connection_error" || !strings.Contains(out["error"].(string), "was lost") {
		t.Fatalf("unreachable: %d %v", st, out)
	}

	unknown := "dddddddd" + id[8:]
	st, out = call(t, b, runnertest.AgentToken, "select_query", `{"table":"orders","session_id":"`+unknown+`"}`)
	if st != 404 || out["errorType"] != "session_not_found" || !strings.Contains(out["error"].(string), "tag dddddddd") {
		t.Fatalf("unknown tag: %d %v", st, out)
	}
}

// The internal endpoint refuses what the fleet did not sign: no signature (401), another
// secret, a changed body, a replay, an old time (403), another replica's tag (421).
func TestInternalEndpointRefusesForgeries(t *testing.T) {
	_, dsn := writableDB(t)
	fl := newFleet(t, dsn, 2)
	a := fl[0]
	_, out := call(t, a, runnertest.AgentToken, "pg_tx", `{"action":"begin"}`)
	id := out["session_id"].(string)
	body, _ := json.Marshal(tools.ForwardCall{Tag: a.tag, SessionID: id, Tool: "insert_data",
		Principal: tools.Principal{Name: "agent", Scopes: []string{"read", "write"}},
		Args:      json.RawMessage(`{"table":"orders","row":{"id":102},"session_id":"` + id + `"}`)})
	url := a.srv.URL + forward.PathForward
	send := func(req *http.Request) int {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	newReq := func(b []byte) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
		return req
	}
	if st := send(newReq(body)); st != 401 {
		t.Fatalf("unsigned: %d", st)
	}
	other := forward.NewSigner([]byte("another-secret-of-32-bytes-or-more!!"), nil)
	req := newReq(body)
	other.Sign(req, body, a.tag, "bbbbbbbb")
	if st := send(req); st != 403 {
		t.Fatalf("another secret: %d", st)
	}
	good := forward.NewSigner(secret, nil)
	req = newReq([]byte(strings.Replace(string(body), `"id":102}`, `"id":103}`, 1)))
	good.Sign(req, body, a.tag, "bbbbbbbb") // signed over the original body
	if st := send(req); st != 403 {
		t.Fatalf("changed body: %d", st)
	}
	old := forward.NewSigner(secret, func() time.Time { return time.Now().Add(-time.Minute) })
	req = newReq(body)
	old.Sign(req, body, a.tag, "bbbbbbbb")
	if st := send(req); st != 403 {
		t.Fatalf("stale: %d", st)
	}
	req = newReq(body)
	good.Sign(req, body, "cccccccc", "bbbbbbbb")
	if st := send(req); st != 421 {
		t.Fatalf("misdirected: %d", st)
	}
	req = newReq(body)
	good.Sign(req, body, a.tag, "bbbbbbbb")
	replay := newReq(body)
	replay.Header = req.Header.Clone()
	if st := send(req); st != 200 {
		t.Fatalf("signed: %d", st)
	}
	if st := send(replay); st != 403 {
		t.Fatalf("replayed: %d", st)
	}
	// Only the one signed call ran: one row inserted in the session.
	st, out := call(t, a, runnertest.AgentToken, "select_query", `{"table":"orders","where":"id >= 100","session_id":"`+id+`"}`)
	if st != 200 || out["rowCount"] != float64(1) {
		t.Fatalf("rows in the session: %d %v", st, out)
	}
}

// A forwarded call is never forwarded again: B's answer for a session whose tag the owner
// (wrongly) maps back to B is B's own session_not_found, not a loop.
func TestNoForwardingLoop(t *testing.T) {
	_, dsn := writableDB(t)
	fl := newFleet(t, dsn, 2)
	a, b := fl[0], fl[1]
	ghost := "eeeeeeee-0000-4000-8000-000000000000"
	a.loc.set("eeeeeeee", b.srv.URL, true)
	b.loc.set("eeeeeeee", a.srv.URL, true)
	// B is addressed as eeeeeeee, so it refuses (421) and A answers the session as lost.
	st, out := call(t, a, runnertest.AgentToken, "select_query", `{"table":"orders","session_id":"`+ghost+`"}`)
	if st != 503 || !strings.Contains(out["error"].(string), "was lost") {
		t.Fatalf("misaddressed: %d %v", st, out)
	}
	// Signed for the right tag but forwarded: runs here, never sent on.
	c := forward.NewClient(forward.NewSigner(secret, nil), a.tag)
	if _, err := c.Identify(context.Background(), b.srv.URL); err != nil {
		t.Fatal(err)
	}
	reg := b.rt.Registry()
	_, _, terr := reg.Call(tools.WithForwarded(context.Background()), tools.Principal{Name: "agent", Scopes: []string{"read"}},
		"select_query", []byte(`{"table":"orders","session_id":"`+a.tag+`-0000-4000-8000-000000000000"}`))
	if terr == nil || terr.Type != tools.ErrSessionNotFound {
		t.Fatalf("a forwarded call for another tag: %v", terr)
	}
}

// Peers finds the replicas of a list by asking their tags, skips itself, and loses a peer that
// stops answering.
func TestPeersLocator(t *testing.T) {
	_, dsn := writableDB(t)
	fl := newFleet(t, dsn, 3)
	a, b, c := fl[0], fl[1], fl[2]
	client := forward.NewClient(forward.NewSigner(secret, nil), a.tag)
	p := forward.NewPeers(forward.PeersOptions{URLs: []string{a.srv.URL, b.srv.URL, c.srv.URL}, Interval: 200 * time.Millisecond}, a.tag, client)
	ctx := context.Background()
	p.Probe(ctx)
	if n, _ := p.Live(ctx); n != 3 {
		t.Fatalf("live: %d", n)
	}
	if addr, live, err := p.Owner(ctx, c.tag); err != nil || !live || addr != c.srv.URL {
		t.Fatalf("owner of c: %q %v %v", addr, live, err)
	}
	if _, _, err := p.Owner(ctx, a.tag); err != forward.ErrUnknownTag {
		t.Fatalf("itself: %v", err)
	}
	if p.Name(b.tag) != "bbbbbbbb" {
		t.Fatalf("name of b: %q", p.Name(b.tag))
	}
	c.srv.Close()
	time.Sleep(700 * time.Millisecond) // past 3 intervals
	p.Probe(ctx)
	if _, live, err := p.Owner(ctx, c.tag); err != nil || live {
		t.Fatalf("stopped c: live %v, %v", live, err)
	}
	if n, _ := p.Live(ctx); n != 2 {
		t.Fatalf("live after c stopped: %d", n)
	}
	// A peer signed with another secret is never found.
	stranger := forward.NewPeers(forward.PeersOptions{URLs: []string{b.srv.URL}}, a.tag,
		forward.NewClient(forward.NewSigner([]byte("another-secret-of-32-bytes-or-more!!"), nil), a.tag))
	stranger.Probe(ctx)
	if _, _, err := stranger.Owner(ctx, b.tag); err != forward.ErrUnknownTag {
		t.Fatalf("found through another secret: %v", err)
	}
}

// Two addresses claiming one tag: the tag is not forwarded to either.
func TestPeersTagClaimedTwice(t *testing.T) {
	sig := forward.NewSigner(secret, nil)
	claim := func() *httptest.Server {
		h := forward.NewHandler(sig, "12345678", "twin", nil, zerolog.Nop())
		return httptest.NewServer(h)
	}
	s1, s2 := claim(), claim()
	defer s1.Close()
	defer s2.Close()
	p := forward.NewPeers(forward.PeersOptions{URLs: []string{s1.URL, s2.URL}}, "aaaaaaaa", forward.NewClient(sig, "aaaaaaaa"))
	p.Probe(context.Background())
	if _, live, err := p.Owner(context.Background(), "12345678"); err != nil || live {
		t.Fatalf("a tag two replicas claim: live %v, %v", live, err)
	}
}

// DNS: every address a name resolves to is asked its tag.
func TestPeersDNS(t *testing.T) {
	_, dsn := writableDB(t)
	fl := newFleet(t, dsn, 2)
	b := fl[1]
	host, port, _ := strings.Cut(strings.TrimPrefix(b.srv.URL, "http://"), ":")
	p := forward.NewPeers(forward.PeersOptions{DNS: "pgtools-headless.test:" + port,
		Resolve: func(_ context.Context, name string) ([]string, error) {
			if name != "pgtools-headless.test" {
				t.Errorf("resolved %q", name)
			}
			return []string{host}, nil
		}}, fl[0].tag, forward.NewClient(forward.NewSigner(secret, nil), fl[0].tag))
	p.Probe(context.Background())
	if addr, live, err := p.Owner(context.Background(), b.tag); err != nil || !live || addr != b.srv.URL {
		t.Fatalf("owner through DNS: %q %v %v", addr, live, err)
	}
}

// A token limited to 10 calls/s gets about 10/s from a fleet of three replicas it spreads its
// calls over, not 30: each replica takes a third of the rate and of the burst.
func TestFleetRateLimit(t *testing.T) {
	_, dsn := writableDB(t)
	fl := newFleetWith(t, dsn, 3, func(c *config.Config) { c.Limits.RatePerSecond = 10 })
	time.Sleep(200 * time.Millisecond) // the replicas count each other
	// 100 calls/s for 3 s, round-robin: ten times the token's rate.
	ok, limited := 0, 0
	client := &http.Client{}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	for i := 0; i < 300; i++ {
		<-tick.C
		r := fl[i%3]
		resp, err := client.Do(apitest.Request(http.MethodPost, r.srv.URL+"/v1/tools/select_query", runnertest.ReadToken, `{"table":"orders","limit":1}`))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case 200:
			ok++
		case 429:
			limited++
		default:
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	secs := time.Since(start).Seconds()
	// The bound: rate × time plus the fleet's burst, 3 × ceil(10/3) = 12.
	most := int(10*secs) + 12
	t.Logf("%d admitted, %d limited in %.2f s (at most %d)", ok, limited, secs, most)
	if ok > most || ok < int(10*secs)-3 || limited == 0 {
		t.Fatalf("%d calls admitted in %.2f s by 3 replicas; want about %d, at most %d", ok, secs, int(10*secs), most)
	}
}

// A token's session share holds for the fleet: 3 sessions across 3 replicas is one on each.
func TestFleetSessionShare(t *testing.T) {
	_, dsn := writableDB(t)
	fl := newFleetWith(t, dsn, 3, func(c *config.Config) { c.Sessions.MaxSessionsPerPrincipal = 3 })
	runnertest.WaitFor(t, 5*time.Second, "the session share split by 3", func() bool {
		return strings.Contains(fl[0].log.String(), `"live_replicas":3`)
	})
	if st, out := call(t, fl[0], runnertest.AgentToken, "pg_tx", `{"action":"begin"}`); st != 200 {
		t.Fatalf("first begin: %d %v", st, out)
	}
	st, out := call(t, fl[0], runnertest.AgentToken, "pg_tx", `{"action":"begin"}`)
	if st != 429 || out["errorType"] != "session_limit_reached" {
		t.Fatalf("second begin on one replica: %d %v", st, out)
	}
	if st, out := call(t, fl[1], runnertest.AgentToken, "pg_tx", `{"action":"begin"}`); st != 200 {
		t.Fatalf("begin on another replica: %d %v", st, out)
	}
}

// MCP tools/call on every protocol version (the go-sdk path before 2026-07-28, the per-request
// path from it) is forwarded like an HTTP call: a session begun on A continues through B's /mcp.
func TestForwardedMCPCall(t *testing.T) {
	db, dsn := writableDB(t)
	fl := newFleet(t, dsn, 2)
	a, b := fl[0], fl[1]
	for i, v := range []string{"2025-06-18", "2025-11-25", "2026-07-28"} {
		t.Run(v, func(t *testing.T) {
			_, out := call(t, a, runnertest.AgentToken, "pg_tx", `{"action":"begin"}`)
			id := out["session_id"].(string)
			meta, hdr := "", []string{"Mcp-Protocol-Version", v}
			if v >= "2026-07-28" {
				meta = `"_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/protocolVersion":"` + v + `"},`
				hdr = append(hdr, "Mcp-Method", "tools/call", "Mcp-Name", "insert_data")
			}
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{%s"name":"insert_data","arguments":{"table":"orders","row":{"id":%d},"session_id":"%s"}}}`, meta, 200+i, id)
			st, raw, _ := apitest.MCPPost(t, b.srv.URL, runnertest.AgentToken, body, hdr...)
			if st != 200 || !strings.Contains(string(raw), `\"affectedRows\":1`) || strings.Contains(string(raw), "session_not_found") {
				t.Fatalf("MCP %s insert through B: %d %s", v, st, raw)
			}
			if st, out := call(t, b, runnertest.AgentToken, "pg_tx", `{"action":"commit","session_id":"`+id+`"}`); st != 200 {
				t.Fatalf("commit: %d %v", st, out)
			}
			if n := db.QueryInt(t, `SELECT count(*) FROM orders WHERE id = $1`, 200+i); n != 1 {
				t.Fatalf("rows: %d", n)
			}
		})
	}
}
