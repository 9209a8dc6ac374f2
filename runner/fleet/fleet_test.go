// Package fleet tests pgtools beyond one machine: three `pgtools serve` replicas behind a real
// NGINX on loopback, against a real PostgreSQL (tools/pgtest). It is tests only; run it with
// make test-fleet (or go test ./runner/fleet). Without nginx it skips, and fails under CI.
package fleet

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/session"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// replica is one running pgtools serve.
type replica struct {
	id   string
	addr string
	cmd  *exec.Cmd
	done chan struct{}
}

// stopReplica drains r as Kubernetes or an operator would: SIGTERM, then it rolls its sessions
// back and exits (within 20 s, or the test fails).
func stopReplica(t *testing.T, r *replica) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("replica %s did not exit after SIGTERM", r.id)
	}
}

// fleet is PostgreSQL, three replicas and NGINX in front of them.
type fleet struct {
	replicas []*replica
	proxy    string // NGINX's address
	byAddr   map[string]*replica
	byTag    map[string]*replica
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitHTTP(t *testing.T, url string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s did not answer 200 within %s", url, within)
}

func nginxPath(t *testing.T) string {
	for _, p := range []string{"/usr/sbin/nginx"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("nginx is not installed (make deps-test installs it)")
	}
	t.Skip("nginx is not installed: make deps-test installs it")
	return ""
}

// nginxConf is the proxy's configuration: sessions route by the replica tag their id starts with
// (a map on X-PgTools-Session, each replica's upstream falling back to the others when it is
// gone, so the survivors answer session_not_found), everything else by mode: "hash" is
// `hash $http_x_pgtools_session consistent` over all replicas (requests without the header spread
// round-robin), "map" adds the prefix map in front, "spread" sends every request round-robin.
func nginxConf(dir, listen, mode string, rs []*replica) string {
	var b strings.Builder
	fmt.Fprintf(&b, "worker_processes 1;\ndaemon off;\npid %s/nginx.pid;\nerror_log %s/error.log warn;\nevents { worker_connections 512; }\nhttp {\n", dir, dir)
	for _, p := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		fmt.Fprintf(&b, "  %s_temp_path %s/%s;\n", p, dir, p)
	}
	b.WriteString("  access_log off;\n  upstream pgtools_all {\n")
	if mode != "spread" { // spread: round-robin for every request, no header routing at all
		b.WriteString("    hash $http_x_pgtools_session consistent;\n")
	}
	for _, r := range rs {
		fmt.Fprintf(&b, "    server %s max_fails=1 fail_timeout=30s;\n", r.addr)
	}
	b.WriteString("    keepalive 16;\n  }\n")
	for i, r := range rs {
		fmt.Fprintf(&b, "  upstream pgtools_%s {\n    server %s max_fails=1 fail_timeout=30s;\n", r.id, r.addr)
		for j, o := range rs {
			if j != i {
				fmt.Fprintf(&b, "    server %s backup;\n", o.addr)
			}
		}
		b.WriteString("  }\n")
	}
	b.WriteString("  map $http_x_pgtools_session $pgtools_upstream {\n    default pgtools_all;\n")
	if mode == "map" {
		for _, r := range rs {
			fmt.Fprintf(&b, "    ~*^%s- pgtools_%s;\n", session.ReplicaTag(r.id), r.id)
		}
	}
	b.WriteString("  }\n")
	fmt.Fprintf(&b, `  server {
    listen %s;
    location / {
      proxy_pass http://$pgtools_upstream;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_next_upstream error timeout http_502;
      add_header X-Upstream $upstream_addr always;
    }
  }
}
`, listen)
	return b.String()
}

func startFleet(t *testing.T, mode string) *fleet {
	t.Helper()
	f, dir := startReplicas(t, "r1", "r2", "r3")
	f.proxy = freeAddr(t)
	startNGINX(t, dir, f.proxy, nginxConf(dir, f.proxy, mode, f.replicas))
	return f
}

// startReplicas starts PostgreSQL (table items, 50 rows) and one pgtools serve per replica id,
// ready; dir is a scratch directory for the proxy's files.
func startReplicas(t *testing.T, ids ...string) (*fleet, string) {
	t.Helper()
	return startReplicasWith(t, nil, ids...)
}

// startReplicasWith is startReplicas with more arguments for each replica's pgtools serve:
// extra(r, all) gives them, once every replica's address is known.
func startReplicasWith(t *testing.T, extra func(r *replica, all []*replica) []string, ids ...string) (*fleet, string) {
	t.Helper()
	nginxPath(t) // skip before starting anything when there is no NGINX to put in front
	db := pgtest.New(t)
	db.Exec(t, `CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL);
		INSERT INTO items SELECT i, 'item ' || i FROM generate_series(1, 50) i`)
	dsn := db.RoleDSN(t, "fleet")
	db.Exec(t, `GRANT INSERT, UPDATE, DELETE ON items TO "`+db.RoleName("fleet")+`"`)
	// A replica given --state default creates its state schema at start (Kubernetes test).
	db.Exec(t, `GRANT CREATE ON DATABASE "`+db.Name+`" TO "`+db.RoleName("fleet")+`"`)

	dir, err := os.MkdirTemp("", "pgtools-fleet-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "pgtools")
	build := exec.Command("go", "build", "-o", bin, "github.com/pgtools/pgtools/cmd/pgtools")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building pgtools: %v\n%s", err, out)
	}
	f := &fleet{byAddr: map[string]*replica{}, byTag: map[string]*replica{}}
	var all []*replica
	for _, id := range ids {
		all = append(all, &replica{id: id, addr: freeAddr(t), done: make(chan struct{})})
	}
	for _, r := range all {
		args := []string{"serve", "--listen", r.addr, "--replica-id", r.id}
		if extra != nil {
			args = append(args, extra(r, all)...)
		}
		r.cmd = exec.Command(bin, args...)
		r.cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "PGTOOLS_LOG_LEVEL=warn")
		r.cmd.Stderr = os.Stderr
		r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { _ = r.cmd.Wait(); close(r.done) }()
		t.Cleanup(func() { _ = r.cmd.Process.Kill(); <-r.done })
		f.replicas = append(f.replicas, r)
		f.byAddr[r.addr] = r
		f.byTag[session.ReplicaTag(r.id)] = r
	}
	for _, r := range f.replicas {
		waitHTTP(t, "http://"+r.addr+"/readyz", 15*time.Second)
	}
	return f, dir
}

// startNGINX runs NGINX with config text, listening on listen, until the test ends.
func startNGINX(t *testing.T, dir, listen, text string) {
	t.Helper()
	ngx := nginxPath(t)
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	ncmd := exec.Command(ngx, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log"))
	ncmd.Stderr = os.Stderr
	ncmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := ncmd.Start(); err != nil {
		t.Fatal(err)
	}
	ndone := make(chan struct{})
	go func() { _ = ncmd.Wait(); close(ndone) }()
	t.Cleanup(func() { _ = ncmd.Process.Signal(syscall.SIGQUIT); <-ndone })
	waitHTTP(t, "http://"+listen+"/healthz", 10*time.Second)
}

// answer is one call through the proxy: the JSON body and the replica that served it.
type answer struct {
	status  int
	body    map[string]any
	replica *replica
}

func (f *fleet) call(t *testing.T, c *http.Client, tool, args, header string) answer {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+f.proxy+"/v1/tools/"+tool, strings.NewReader(args))
	req.Header.Set("Content-Type", "application/json")
	if header != "" {
		req.Header.Set("X-PgTools-Session", header)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, replica: f.byAddr[lastUpstream(resp.Header.Get("X-Upstream"))]}
	if err := json.Unmarshal(raw, &a.body); err != nil {
		t.Fatalf("%s: %d %s", tool, resp.StatusCode, raw)
	}
	return a
}

// lastUpstream is the replica that answered: NGINX lists every upstream it tried.
func lastUpstream(s string) string {
	// After an internal redirect (error_page), the redirects' lists are joined by " : ".
	parts := strings.Split(strings.ReplaceAll(s, " : ", ","), ",")
	return strings.TrimSpace(parts[len(parts)-1])
}

// TestFleetBehindNGINX: spread, session routing by the id's replica tag, and a drain.
func TestFleetBehindNGINX(t *testing.T) {
	f := startFleet(t, "map")
	c := &http.Client{Timeout: 10 * time.Second}

	// Stateless load spreads over every replica: 300 reads, 6 at a time.
	const calls, workers = 300, 6
	var mu sync.Mutex
	per := map[string]int{}
	var wg sync.WaitGroup
	jobs := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				a := f.call(t, c, "select_query", fmt.Sprintf(`{"table":"items","where":"id = %d"}`, i%50+1), "")
				if a.status != 200 || a.replica == nil {
					t.Errorf("stateless call: %d %v", a.status, a.body)
					continue
				}
				mu.Lock()
				per[a.replica.id]++
				mu.Unlock()
			}
		}()
	}
	start := time.Now()
	for i := range calls {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	t.Logf("FLEET spread: %d stateless calls in %s, per replica %v", calls, time.Since(start).Round(time.Millisecond), per)
	for _, r := range f.replicas {
		if per[r.id] < calls/10 {
			t.Errorf("replica %s served %d of %d calls: load did not spread", r.id, per[r.id], calls)
		}
	}

	// Sessions begun through the proxy land anywhere; continued with the header they reach the
	// replica whose tag opens their id.
	const sessions = 12
	type sess struct {
		id     string
		holder *replica
	}
	var open []sess
	for range sessions {
		a := f.call(t, c, "pg_tx", `{"action":"begin"}`, "")
		id, _ := a.body["session_id"].(string)
		if a.status != 200 || id == "" || f.byTag[session.TagOf(id)] != a.replica {
			t.Fatalf("begin: %d %v on %v", a.status, a.body, a.replica)
		}
		if hint, _ := a.body["hint"].(string); !strings.Contains(hint, "X-PgTools-Session: "+id) {
			t.Errorf("begin's hint does not name the header: %q", hint)
		}
		open = append(open, sess{id, a.replica})
	}
	routed := 0
	for round := range 3 {
		for i, s := range open {
			// A row of its own per session: sessions on one row would wait on each other's locks.
			a := f.call(t, c, "update_data", fmt.Sprintf(`{"table":"items","set":{"name":"s%d"},"where":"id = %d","session_id":%q}`, round, i+1, s.id), s.id)
			if a.status == 200 && a.replica == s.holder {
				routed++
			} else {
				t.Errorf("session %s (on %s): %d %v via %v", s.id, s.holder.id, a.status, a.body, a.replica)
			}
		}
	}
	t.Logf("FLEET sessions: %d of %d continued calls reached the replica holding their session", routed, 3*sessions)
	// Header and session_id that disagree are refused before anything runs.
	if a := f.call(t, c, "select_query", fmt.Sprintf(`{"table":"items","session_id":%q}`, open[0].id), open[1].id); a.status != 400 || a.body["errorType"] != "invalid_arguments" {
		t.Errorf("header disagreeing with session_id: %d %v", a.status, a.body)
	}

	// Drain r1: SIGTERM, it rolls its sessions back and leaves; the proxy sends its traffic on.
	victim := f.replicas[0]
	stopReplica(t, victim)
	per = map[string]int{}
	for i := range 60 {
		a := f.call(t, c, "select_query", fmt.Sprintf(`{"table":"items","where":"id = %d"}`, i%50+1), "")
		if a.status != 200 || a.replica == nil || a.replica == victim {
			t.Errorf("stateless call after drain: %d %v via %v", a.status, a.body, a.replica)
			continue
		}
		per[a.replica.id]++
	}
	lost, kept := 0, 0
	for _, s := range open {
		a := f.call(t, c, "select_query", fmt.Sprintf(`{"table":"items","where":"id = 1","session_id":%q}`, s.id), s.id)
		if s.holder == victim {
			sug, _ := a.body["suggestion"].(string)
			if a.status != 404 || a.body["errorType"] != "session_not_found" || !strings.Contains(sug, "X-PgTools-Session") ||
				!strings.Contains(fmt.Sprint(a.body["error"]), "tag "+session.ReplicaTag(victim.id)) {
				t.Errorf("session of the drained replica: %d %v", a.status, a.body)
			}
			lost++
			continue
		}
		if a.status != 200 || a.replica != s.holder {
			t.Errorf("session on %s disturbed by the drain: %d %v via %v", s.holder.id, a.status, a.body, a.replica)
		}
		kept++
	}
	t.Logf("FLEET drain of %s: 60 stateless calls after it, per replica %v; %d of its sessions answer session_not_found naming its tag, %d sessions on the others untouched", victim.id, per, lost, kept)
	if lost == 0 || kept == 0 {
		t.Errorf("drain: want sessions on both sides (lost %d, kept %d)", lost, kept)
	}
}

// TestFleetHashAlone measures what `hash $http_x_pgtools_session consistent` alone does with
// sessions: the begin carries no id, so it lands by round-robin, and the id's hash then picks
// a replica unrelated to the one holding it. The test pins that this misroutes (so docs/scaling.md's
// advice to map on the id's replica prefix stays necessary) and that the misrouted calls get
// session_not_found naming the holder's tag.
func TestFleetHashAlone(t *testing.T) {
	f := startFleet(t, "hash")
	c := &http.Client{Timeout: 10 * time.Second}
	const n = 15
	routed, foreign := 0, 0
	for range n {
		a := f.call(t, c, "pg_tx", `{"action":"begin"}`, "")
		id, _ := a.body["session_id"].(string)
		if id == "" {
			t.Fatalf("begin: %d %v", a.status, a.body)
		}
		b := f.call(t, c, "select_query", fmt.Sprintf(`{"table":"items","where":"id = 1","session_id":%q}`, id), id)
		switch {
		case b.status == 200 && b.replica == a.replica:
			routed++
		case b.status == 404 && strings.Contains(fmt.Sprint(b.body["error"]), "tag "+session.TagOf(id)):
			foreign++
		default:
			t.Errorf("session %s: %d %v", id, b.status, b.body)
		}
	}
	t.Logf("FLEET hash alone: %d of %d sessions reached their replica, %d answered session_not_found naming the holder", routed, n, foreign)
	if foreign == 0 {
		t.Errorf("hash alone routed every session right by chance (%d of %d); the measurement says nothing", routed, n)
	}
}
