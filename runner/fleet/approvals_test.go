package fleet

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgtools/pgtools/tools/pgtest"
)

const (
	agentToken    = "agent-secret-0123456789abcdef"
	approverToken = "approver-secret-0123456789abcdef"
)

// stateFleet is three replicas sharing their approvals in a state database, behind an NGINX
// that spreads every request round-robin (no header routing).
type stateFleet struct {
	*fleet
	bin, conf string
	db        *pgtest.DB
	cut       func() // cuts the replicas off the state database
}

// startStateFleet starts PostgreSQL (table items, 50 rows), three replicas whose database
// "default" has the rule rows_over 2 and whose state is database "state" (the same server,
// reached through a TCP forwarder the test can cut), sharing a fleet secret and no peer list (the
// registry finds the peers), and NGINX in spread mode.
func startStateFleet(t *testing.T) *stateFleet {
	t.Helper()
	nginxPath(t)
	db := pgtest.New(t)
	db.Exec(t, `CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL);
		INSERT INTO items SELECT i, 'item ' || i FROM generate_series(1, 50) i`)
	dsn := db.RoleDSN(t, "fleet")
	db.Exec(t, `GRANT INSERT, UPDATE, DELETE ON items TO "`+db.RoleName("fleet")+`"`)
	cfg, err := pgxpool.ParseConfig(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	fwd, cut := tcpForward(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	stateDSN := strings.Replace(db.DSN, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))), fwd, 1)
	if stateDSN == db.DSN {
		t.Fatalf("the state DSN does not go through the forwarder")
	}
	dir, err := os.MkdirTemp("", "pgtools-fleet-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	secret := filepath.Join(dir, "fleet-secret")
	if err := os.WriteFile(secret, []byte("fleet-secret-0123456789abcdef0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf, _ := json.Marshal(map[string]any{
		"databases": map[string]any{
			"default": map[string]any{"url": dsn, "policy": map[string]any{"require_approval": []any{map[string]any{"when": "rows_over", "rows": 2}}}},
			"state":   map[string]any{"url": stateDSN},
		},
		"tokens": []any{
			map[string]any{"name": "agent", "token": agentToken, "scopes": []string{"read", "write"}, "databases": []string{"default"}},
			map[string]any{"name": "approver", "token": approverToken, "scopes": []string{"read", "approve"}, "databases": []string{"default"}},
		},
		"state": "state",
		// No peers: the replicas find each other in the state's registry to forward sessions.
		"fleet": map[string]any{"secret_file": secret},
	})
	sf := &stateFleet{fleet: &fleet{byAddr: map[string]*replica{}, byTag: map[string]*replica{}}, bin: filepath.Join(dir, "pgtools"), conf: filepath.Join(dir, "pgtools.json"), db: db, cut: cut}
	if err := os.WriteFile(sf.conf, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("go", "build", "-o", sf.bin, "github.com/pgtools/pgtools/cmd/pgtools").CombinedOutput(); err != nil {
		t.Fatalf("building pgtools: %v\n%s", err, out)
	}
	for _, id := range []string{"r1", "r2", "r3"} {
		r := &replica{id: id, addr: freeAddr(t)}
		sf.start(t, r)
		sf.replicas = append(sf.replicas, r)
		sf.byAddr[r.addr] = r
	}
	for _, r := range sf.replicas {
		waitHTTP(t, "http://"+r.addr+"/readyz", 15*time.Second)
	}
	sf.proxy = freeAddr(t)
	startNGINX(t, dir, sf.proxy, nginxConf(dir, sf.proxy, "spread", sf.replicas))
	return sf
}

// start runs replica r (again, after a stop or a kill: same id and address).
func (sf *stateFleet) start(t *testing.T, r *replica) {
	t.Helper()
	r.done = make(chan struct{})
	r.cmd = exec.Command(sf.bin, "serve", "--config", sf.conf, "--listen", r.addr, "--replica-id", r.id)
	r.cmd.Env = append(os.Environ(), "PGTOOLS_LOG_LEVEL=error")
	r.cmd.Stderr = os.Stderr
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := r.done
	cmd := r.cmd
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
}

// tcpForward listens on loopback and forwards to target until cut, which closes the listener and
// every connection: the state database going away.
func tcpForward(t *testing.T, target string) (addr string, cut func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	closed := false
	cut = func() {
		mu.Lock()
		defer mu.Unlock()
		closed = true
		ln.Close()
		for _, c := range conns {
			c.Close()
		}
	}
	t.Cleanup(cut)
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			mu.Lock()
			if err != nil || closed {
				mu.Unlock()
				in.Close()
				continue
			}
			conns = append(conns, in, out)
			mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	return ln.Addr().String(), cut
}

// do sends one request to base (the proxy or one replica) with token.
func (sf *stateFleet) do(t *testing.T, base, method, path, token, body string) answer {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, replica: sf.byAddr[lastUpstream(resp.Header.Get("X-Upstream"))]}
	if a.replica == nil {
		a.replica = sf.byAddr[base]
	}
	if err := json.Unmarshal(raw, &a.body); err != nil {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return a
}

// ask makes a delete of ids from..to (more than 2 rows: the rule asks) through base and returns
// the approval request's id and the replica that measured it.
func (sf *stateFleet) ask(t *testing.T, base string, from, to int) (string, *replica) {
	t.Helper()
	a := sf.do(t, base, "POST", "/v1/tools/delete_data", agentToken, fmt.Sprintf(`{"table":"items","where":"id BETWEEN %d AND %d","autocommit":true}`, from, to))
	ap, _ := a.body["approval"].(map[string]any)
	id, _ := ap["id"].(string)
	if a.body["errorType"] != "approval_required" || id == "" {
		t.Fatalf("the delete did not ask for approval: %d %v", a.status, a.body)
	}
	return id, a.replica
}

func (sf *stateFleet) recall(t *testing.T, base, id string, from, to int) answer {
	t.Helper()
	return sf.do(t, base, "POST", "/v1/tools/delete_data", agentToken, fmt.Sprintf(`{"table":"items","where":"id BETWEEN %d AND %d","autocommit":true,"approval_id":%q}`, from, to, id))
}

func (sf *stateFleet) status(t *testing.T, base, id string) string {
	t.Helper()
	a := sf.do(t, base, "GET", "/v1/approvals/"+id, approverToken, "")
	ap, _ := a.body["approval"].(map[string]any)
	s, _ := ap["status"].(string)
	if s == "" {
		t.Fatalf("approval %s via %s: %d %v", id, base, a.status, a.body)
	}
	return s
}

func (sf *stateFleet) items(t *testing.T) int64 {
	return sf.db.QueryInt(t, `SELECT count(*) FROM items`)
}

// TestFleetApprovals: approvals in the state database behind a round-robin proxy. A delete
// needing approval is asked through one replica, which is SIGKILLed before anyone decides; the
// request survives, is approved through another, re-called through a third and commits exactly
// once. A rolling restart of all three keeps a pending and an approved request. Two re-calls
// racing on two replicas: exactly one commits. A request made on one replica is listed by
// another at once. With the state database cut, a call needing approval gets a retryable
// connection_error while reads and writes no rule matches go on.
func TestFleetApprovals(t *testing.T) {
	sf := startStateFleet(t)
	proxy := sf.proxy
	before := sf.items(t)

	// Asked through A; A dies before the approval.
	id, a := sf.ask(t, proxy, 1, 5)
	if a == nil {
		t.Fatal("no replica named for the ask")
	}
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.done
	if got := sf.status(t, proxy, id); got != "pending" {
		t.Fatalf("after A's SIGKILL the request is %s", got)
	}
	// Approved through B (the proxy passes A's failure on to a live replica).
	d := sf.do(t, proxy, "POST", "/v1/approvals/"+id, approverToken, `{"decision":"approve"}`)
	if d.status != 200 || d.replica == a {
		t.Fatalf("approve: %d %v via %v", d.status, d.body, d.replica)
	}
	sf.start(t, a) // A comes back
	waitHTTP(t, "http://"+a.addr+"/readyz", 15*time.Second)
	// Re-called through C: commits once; a second re-call through any replica is refused.
	var c *replica
	for _, r := range sf.replicas {
		if r != a && r != d.replica {
			c = r
		}
	}
	rc := sf.recall(t, c.addr, id, 1, 5)
	if rc.status != 200 || sf.items(t) != before-5 {
		t.Fatalf("the re-call through C: %d %v; %d items", rc.status, rc.body, sf.items(t))
	}
	for _, r := range sf.replicas {
		again := sf.recall(t, r.addr, id, 1, 5)
		if again.status == 200 || !strings.Contains(fmt.Sprint(again.body["error"]), "is used and cannot be used again") {
			t.Fatalf("a second use through %s: %d %v", r.id, again.status, again.body)
		}
	}
	if got := sf.items(t); got != before-5 {
		t.Fatalf("%d items, want %d: the approved delete did not commit exactly once", got, before-5)
	}
	t.Logf("FLEET approvals: asked via %s (then SIGKILLed), approved via %s, re-called via %s: one commit", a.id, d.replica.id, c.id)

	// Visible on another replica at once: ask on r1, list on r2 until it shows.
	start := time.Now()
	fresh, _ := sf.ask(t, sf.replicas[0].addr, 10, 14)
	asked := time.Since(start)
	start = time.Now()
	seen := time.Duration(-1)
	for time.Since(start) < time.Second {
		l := sf.do(t, sf.replicas[1].addr, "GET", "/v1/approvals", approverToken, "")
		if strings.Contains(fmt.Sprint(l.body["approvals"]), fresh) {
			seen = time.Since(start)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if seen < 0 {
		t.Fatal("a request made on r1 was not listed by r2 within a second")
	}
	t.Logf("FLEET approvals: a request asked on r1 (%s) was listed by r2 after %s (first list)", asked.Round(time.Millisecond), seen.Round(time.Millisecond))

	// A rolling restart keeps a pending request (fresh) and an approved one.
	approved, _ := sf.ask(t, proxy, 20, 24)
	if d := sf.do(t, proxy, "POST", "/v1/approvals/"+approved, approverToken, `{"decision":"approve"}`); d.status != 200 {
		t.Fatalf("approve: %d %v", d.status, d.body)
	}
	for _, r := range sf.replicas {
		stopReplica(t, r)
		sf.start(t, r)
		waitHTTP(t, "http://"+r.addr+"/readyz", 15*time.Second)
	}
	if got := sf.status(t, proxy, fresh); got != "pending" {
		t.Fatalf("after the rolling restart the pending request is %s", got)
	}
	if got := sf.status(t, proxy, approved); got != "approved" {
		t.Fatalf("after the rolling restart the approved request is %s", got)
	}
	if rc := sf.recall(t, proxy, approved, 20, 24); rc.status != 200 {
		t.Fatalf("the re-call after the rolling restart: %d %v", rc.status, rc.body)
	}

	// Two re-calls racing on two replicas: exactly one commits, five times.
	for round := range 5 {
		from := 30 + round*4
		id, _ := sf.ask(t, proxy, from, from+2)
		if d := sf.do(t, proxy, "POST", "/v1/approvals/"+id, approverToken, `{"decision":"approve"}`); d.status != 200 {
			t.Fatalf("approve: %d %v", d.status, d.body)
		}
		n0 := sf.items(t)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var statuses []int
		for _, r := range sf.replicas[1:] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a := sf.recall(t, r.addr, id, from, from+2)
				mu.Lock()
				statuses = append(statuses, a.status)
				mu.Unlock()
			}()
		}
		wg.Wait()
		ok := 0
		for _, s := range statuses {
			if s == 200 {
				ok++
			}
		}
		if ok != 1 || sf.items(t) != n0-3 {
			t.Fatalf("round %d: racing re-calls answered %v; %d items, want %d", round, statuses, sf.items(t), n0-3)
		}
	}
	t.Log("FLEET approvals: rolling restart kept the pending and the approved request; 5 rounds of two racing re-calls on r2 and r3: one commit each")

	// The state database goes away.
	sf.cut()
	a1 := sf.do(t, proxy, "POST", "/v1/tools/delete_data", agentToken, `{"table":"items","where":"id BETWEEN 10 AND 14","autocommit":true}`)
	if a1.status != 503 || a1.body["errorType"] != "connection_error" || !strings.Contains(fmt.Sprint(a1.body["suggestion"]), "Retry") {
		t.Fatalf("a call needing approval with the state down: %d %v", a1.status, a1.body)
	}
	if l := sf.do(t, proxy, "GET", "/v1/approvals", approverToken, ""); l.status != 503 {
		t.Fatalf("the approver's list with the state down: %d %v", l.status, l.body)
	}
	for i := range 3 {
		r := sf.do(t, proxy, "POST", "/v1/tools/select_query", agentToken, `{"table":"items","where":"id = 50"}`)
		w := sf.do(t, proxy, "POST", "/v1/tools/insert_data", agentToken, fmt.Sprintf(`{"table":"items","rows":[{"id":%d,"name":"x"}],"autocommit":true}`, 100+i))
		if r.status != 200 || w.status != 200 {
			t.Fatalf("with the state down, a read %d %v, a write no rule matches %d %v", r.status, r.body, w.status, w.body)
		}
	}
	t.Log("FLEET approvals: state database cut: approval calls 503 connection_error (retryable), reads and rule-free writes 200")
}

// TestFleetRegistryForwards: with state and a fleet secret but no peer list, the replicas find
// each other in the state's replica registry, so session calls spread round-robin by the proxy
// (no routing header) reach the replica holding their session: begin → insert → commit, three
// sessions, no session_not_found, and some calls were forwarded.
func TestFleetRegistryForwards(t *testing.T) {
	sf := startStateFleet(t)
	before := sf.items(t)
	forwarded := 0
	for i := range 3 {
		b := sf.do(t, sf.proxy, "POST", "/v1/tools/pg_tx", agentToken, `{"action":"begin"}`)
		sid, _ := b.body["session_id"].(string)
		if b.status != 200 || sid == "" {
			t.Fatalf("begin: %d %v", b.status, b.body)
		}
		for _, call := range []struct{ tool, args string }{
			{"insert_data", fmt.Sprintf(`{"table":"items","row":{"id":%d,"name":"via the registry"},"session_id":%q}`, 1000+i, sid)},
			{"select_query", fmt.Sprintf(`{"table":"items","where":"id = %d","session_id":%q}`, 1000+i, sid)},
			{"pg_tx", fmt.Sprintf(`{"action":"commit","session_id":%q}`, sid)},
		} {
			a := sf.do(t, sf.proxy, "POST", "/v1/tools/"+call.tool, agentToken, call.args)
			if a.status != 200 {
				t.Fatalf("%s in session %s through the proxy: %d %v", call.tool, sid, a.status, a.body)
			}
			if a.replica != b.replica {
				forwarded++
			}
		}
	}
	if got := sf.items(t); got != before+3 {
		t.Fatalf("%d items, want %d: the sessions did not all commit", got, before+3)
	}
	if forwarded == 0 {
		t.Fatal("no call landed on a replica other than its session's: the proxy did not spread")
	}
	t.Logf("FLEET registry: 3 sessions through a round-robin proxy, %d of 9 calls forwarded via the state's registry", forwarded)
}

// browser is a browser on the approvals page as far as the page can tell: it keeps cookies,
// follows the 303 after a form and says its forms come from the page (Sec-Fetch-Site), and it
// notes which replica answered each request.
type browser struct {
	t      *testing.T
	sf     *stateFleet
	c      *http.Client
	served map[*replica]bool
}

func newBrowser(t *testing.T, sf *stateFleet) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, sf: sf, c: &http.Client{Jar: jar, Timeout: 15 * time.Second}, served: map[*replica]bool{}}
}

func (b *browser) do(method, path string, form url.Values) (int, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, "http://"+b.sf.proxy+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if r := b.sf.byAddr[lastUpstream(resp.Header.Get("X-Upstream"))]; r != nil {
		b.served[r] = true
	}
	return resp.StatusCode, string(raw)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (b *browser) csrf(page string) string {
	b.t.Helper()
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		b.t.Fatalf("no CSRF field in the page:\n%s", page)
	}
	return m[1]
}

// TestFleetApprovalsPage: an approver signs in to /approvals through a proxy that spreads every
// request round-robin, sees a request another replica measured, approves it on the page and sees
// the outcome on the next page, whichever replicas answer: the sign-ins live in the state
// database. After a rolling restart the approver is still signed in; signing out ends the
// sign-in on every replica.
func TestFleetApprovalsPage(t *testing.T) {
	sf := startStateFleet(t)
	id, _ := sf.ask(t, sf.replicas[0].addr, 30, 34)
	b := newBrowser(t, sf)
	_, form := b.do("GET", "/approvals", nil)
	if status, page := b.do("POST", "/approvals/signin", url.Values{"token": {approverToken}, "csrf": {b.csrf(form)}}); status != 200 || !strings.Contains(page, id) {
		t.Fatalf("after signing in through the proxy: %d, request %s not listed:\n%s", status, id, page)
	}
	for range 3 { // each list is another replica's: still signed in, still listed
		if status, page := b.do("GET", "/approvals", nil); status != 200 || !strings.Contains(page, id) {
			t.Fatalf("the list through the proxy: %d, request %s not listed (signed out on another replica?):\n%s", status, id, page)
		}
	}
	_, list := b.do("GET", "/approvals", nil)
	status, page := b.do("POST", "/approvals/"+id, url.Values{"decision": {"approve"}, "csrf": {b.csrf(list)}})
	if status != 200 || !strings.Contains(page, "Approved "+id) {
		t.Fatalf("approving on the page: %d, no outcome shown:\n%s", status, page)
	}
	if got := sf.status(t, sf.proxy, id); got != "approved" {
		t.Fatalf("after approving on the page the request is %s", got)
	}
	if len(b.served) < 3 {
		t.Fatalf("the page was served by %d replicas; the proxy should have spread it over 3", len(b.served))
	}
	for _, r := range sf.replicas { // a rolling restart keeps the sign-in
		stopReplica(t, r)
		sf.start(t, r)
		waitHTTP(t, "http://"+r.addr+"/readyz", 15*time.Second)
	}
	_, list = b.do("GET", "/approvals", nil)
	if !strings.Contains(list, `action="/approvals/signout"`) {
		t.Fatalf("after a rolling restart the approver is signed out:\n%s", list)
	}
	b.do("POST", "/approvals/signout", url.Values{"csrf": {b.csrf(list)}})
	for range 3 {
		if _, page := b.do("GET", "/approvals", nil); strings.Contains(page, `action="/approvals/signout"`) {
			t.Fatalf("signed out, yet a replica still shows the approver signed in:\n%s", page)
		}
	}
	t.Logf("FLEET approvals page: signed in, listed, approved and signed out through a round-robin proxy, served by %d replicas; the sign-in outlived a rolling restart", len(b.served))
}
