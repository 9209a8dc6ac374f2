package state

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgtools/pgtools/tools/approval"
	"github.com/pgtools/pgtools/tools/approval/approvaltest"
	"github.com/pgtools/pgtools/tools/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func pool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return pgtest.OpenPool(t, cfg)
}

func open(t *testing.T, p *pgxpool.Pool, schema string) *State {
	t.Helper()
	s, err := Open(context.Background(), p, schema)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMigrate: Open creates the schema at Version, a second Open (another replica) finds it
// current, several opening at once agree, and a custom schema name is used as given.
func TestMigrate(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	p := db.Pool(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := Open(context.Background(), p, "")
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if v := db.QueryInt(t, `SELECT version FROM pgtools.schema_version`); v != int64(Version) {
		t.Fatalf("version %d, want %d", v, Version)
	}
	if n := db.QueryInt(t, `SELECT count(*) FROM pgtools.schema_version`); n != 1 {
		t.Fatalf("%d version rows", n)
	}
	s := open(t, p, "fleet_state")
	if s.Schema() != "fleet_state" || db.QueryInt(t, `SELECT count(*) FROM information_schema.tables WHERE table_schema = 'fleet_state'`) != int64(len(tables)) {
		t.Fatal("the custom schema was not made")
	}
	if _, err := Open(context.Background(), p, `bad"name`); err == nil || !strings.Contains(err.Error(), "lower-case identifier") {
		t.Fatalf("a bad schema name: %v", err)
	}
	sql, err := Check(context.Background(), p, "")
	if err != nil || sql != "" {
		t.Fatalf("check of a current schema: %q %v", sql, err)
	}
}

// TestNewerSchemaRefused: a schema a newer pgtools made is refused, clearly, and not touched.
func TestNewerSchemaRefused(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	p := db.Pool(t)
	open(t, p, "")
	db.Exec(t, `UPDATE pgtools.schema_version SET version = version + 1`)
	_, err := Open(context.Background(), p, "")
	if !errors.Is(err, ErrNewerSchema) || !strings.Contains(err.Error(), "knows versions up to") || !strings.Contains(err.Error(), "Run that version (or newer)") {
		t.Fatalf("a newer schema: %v", err)
	}
	if v := db.QueryInt(t, `SELECT version FROM pgtools.schema_version`); v != int64(Version)+1 {
		t.Fatalf("the newer schema was changed to version %d", v)
	}
	if _, err := Check(context.Background(), p, ""); !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("check of a newer schema: %v", err)
	}
}

// TestNoPrivilegePrintsSQL: a login role that may not create the schema is refused with SQL
// that, run by an administrator, lets the same role start; Check prints the same SQL. A role
// that lacks the grants on an existing schema gets the grants to run.
func TestNoPrivilegePrintsSQL(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	p := pool(t, db.RoleDSN(t, "state_user"))
	role := db.RoleName("state_user")
	_, err := Open(context.Background(), p, "")
	var se *SetupError
	if !errors.As(err, &se) || !strings.Contains(se.SQL, "CREATE SCHEMA IF NOT EXISTS \"pgtools\"") || !strings.Contains(se.SQL, `GRANT USAGE ON SCHEMA "pgtools" TO "`+role+`"`) ||
		!strings.Contains(err.Error(), "an administrator runs this SQL") {
		t.Fatalf("no privilege: %v", err)
	}
	sql, err := Check(context.Background(), p, "")
	if err != nil || sql != se.SQL {
		t.Fatalf("check printed %q (%v), want the start's SQL", sql, err)
	}
	if n := db.QueryInt(t, `SELECT count(*) FROM pg_namespace WHERE nspname = 'pgtools'`); n != 0 {
		t.Fatal("a refused start left a schema")
	}
	db.Exec(t, se.SQL)
	s := open(t, p, "")
	st := approval.NewStore(approval.Options{Backend: s.Approvals()})
	if _, e := st.Ask(approval.Call{Party: approval.Party{Name: "a"}, Database: "d", Tool: "t", Digest: "x"}, approval.Effect{}, nil); e != nil {
		t.Fatalf("the role cannot use the schema the SQL made: %v", e)
	}

	// The schema exists and is current, but another role lacks the grants.
	p2 := pool(t, db.RoleDSN(t, "other_user"))
	_, err = Open(context.Background(), p2, "")
	if !errors.As(err, &se) || !strings.HasPrefix(se.SQL, `GRANT USAGE ON SCHEMA "pgtools" TO "`+db.RoleName("other_user")+`"`) {
		t.Fatalf("a role without grants: %v", err)
	}
	db.Exec(t, se.SQL)
	open(t, p2, "")
}

// TestApprovalBackend runs the behaviour every backend shares over the PostgreSQL backend, each
// subtest on a schema of its own.
func TestApprovalBackend(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	p := db.Pool(t)
	n := 0
	approvaltest.Run(t, func(t *testing.T, o approval.Options) *approval.Store {
		n++
		o.Backend = open(t, p, "s"+strings.Repeat("x", n)).Approvals()
		return approval.NewStore(o)
	})
}

var (
	asker = approval.Party{Name: "agent", Credential: "agent"}
	boss  = approval.Party{Name: "boss", Approver: true}
	call  = approval.Call{Party: asker, Database: "default", Tool: "delete_data", Digest: "sha256:x"}
	eff   = approval.Effect{Tables: []approval.TableRows{{Schema: "public", Name: "t", Rows: 5}}, Total: 5, Commands: []string{"DELETE"}}
)

// TestAcrossStores: stores over two pools (two replicas) share requests: one asks, the other
// lists and decides, a third (a restarted replica: a new store object) still holds the pending
// and the approved requests; racing claims from two stores: exactly one wins, every time; the
// pending bound holds across stores.
func TestAcrossStores(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	a := approval.NewStore(approval.Options{MaxPending: 3, Backend: open(t, pool(t, db.DSN), "").Approvals()})
	b := approval.NewStore(approval.Options{MaxPending: 3, Backend: open(t, pool(t, db.DSN), "").Approvals()})
	pending, e := a.Ask(call, eff, []string{"r"})
	if e != nil {
		t.Fatal(e)
	}
	approved, e := a.Ask(call, eff, []string{"r"})
	if e != nil {
		t.Fatal(e)
	}
	if list := b.Pending(boss); len(list) != 2 {
		t.Fatalf("the other store lists %d", len(list))
	}
	if _, e := b.Decide(boss, approved.ID, true); e != nil {
		t.Fatal(e)
	}
	for range 2 {
		if _, e := b.Ask(call, eff, []string{"r"}); e != nil {
			t.Fatal(e)
		}
	}
	if _, e := a.Ask(call, eff, []string{"r"}); e == nil || !strings.Contains(e.Message, "3 approval requests") {
		t.Fatalf("the pending bound across stores: %v", e)
	}

	restarted := approval.NewStore(approval.Options{Backend: open(t, pool(t, db.DSN), "").Approvals()})
	if got, e := restarted.Get(boss, pending.ID); e != nil || got.Status != approval.Pending {
		t.Fatalf("after a restart, the pending request: %+v %v", got, e)
	}
	if got, e := restarted.Get(boss, approved.ID); e != nil || got.Status != approval.Approved || got.Approver != "boss" {
		t.Fatalf("after a restart, the approved request: %+v %v", got, e)
	}

	for round := range 10 {
		ap, e := restarted.Ask(approval.Call{Party: approval.Party{Name: "racer"}, Database: "d", Tool: "t", Digest: "y"}, eff, nil)
		if e != nil {
			t.Fatal(e)
		}
		if _, e := a.Decide(boss, ap.ID, true); e != nil {
			t.Fatal(e)
		}
		c := approval.Call{Party: approval.Party{Name: "racer"}, Database: "d", Tool: "t", Digest: "y"}
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for _, s := range []*approval.Store{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, e := s.Claim(c, ap.ID)
				if e == nil {
					mu.Lock()
					won++
					mu.Unlock()
					s.Finish(got, approval.Used, nil)
				} else if !strings.Contains(e.Message, "being used") && !strings.Contains(e.Message, "is used") {
					t.Errorf("round %d: the loser's answer: %v", round, e)
				}
			}()
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("round %d: %d claims won", round, won)
		}
		if got, _ := a.Get(boss, ap.ID); got.Status != approval.Used {
			t.Fatalf("round %d: %s", round, got.Status)
		}
	}
}

// TestClaimHold: a claim whose holder died ends as expired after ClaimHold: it blocks nobody
// forever and is never claimed again.
func TestClaimHold(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	s := open(t, pool(t, db.DSN), "")
	var events []string
	var mu sync.Mutex
	st := approval.NewStore(approval.Options{ClaimHold: 500 * time.Millisecond, Backend: s.Approvals(), Audit: func(ev approval.Event) {
		mu.Lock()
		events = append(events, ev.What)
		mu.Unlock()
	}})
	ap, _ := st.Ask(call, eff, nil)
	if _, e := st.Decide(boss, ap.ID, true); e != nil {
		t.Fatal(e)
	}
	if _, e := st.Claim(call, ap.ID); e != nil { // and the claimer dies: no Finish
		t.Fatal(e)
	}
	if _, e := st.Claim(call, ap.ID); e == nil || !strings.Contains(e.Message, "being used") {
		t.Fatalf("while claimed: %v", e)
	}
	time.Sleep(700 * time.Millisecond)
	if _, e := st.Claim(call, ap.ID); e == nil || !strings.Contains(e.Message, "is expired and cannot be used again") {
		t.Fatalf("after the hold: %v", e)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(events, " ") != "requested approved expired" {
		t.Fatalf("events: %v", events)
	}
}

// cutter forwards TCP to PostgreSQL until cut: the state database going away under a runner.
type cutter struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	cut   bool
}

func newCutter(t *testing.T, target string) *cutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln}
	t.Cleanup(c.Cut)
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			c.mu.Lock()
			if err != nil || c.cut {
				c.mu.Unlock()
				in.Close()
				continue
			}
			c.conns = append(c.conns, in, out)
			c.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	return c
}

// Cut closes the listener and every connection.
func (c *cutter) Cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = true
	c.ln.Close()
	for _, x := range c.conns {
		x.Close()
	}
}

// TestStateDown: with the state database gone, every approval operation answers a retryable
// connection_error within the store's timeout and changes nothing; Counts keeps the last
// count; the registry's calls fail.
func TestStateDown(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	cfg, err := pgxpool.ParseConfig(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	c := newCutter(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", uint16(c.ln.Addr().(*net.TCPAddr).Port)
	cfg.ConnConfig.ConnectTimeout = time.Second
	p := pgtest.OpenPool(t, cfg)
	s := open(t, p, "")
	var failures []string
	var mu sync.Mutex
	st := approval.NewStore(approval.Options{Timeout: 2 * time.Second, Backend: s.Approvals(), OnError: func(op string, err error) {
		mu.Lock()
		failures = append(failures, op)
		mu.Unlock()
	}})
	ap, e := st.Ask(call, eff, nil)
	if e != nil {
		t.Fatal(e)
	}
	if n := st.Counts().Pending; n != 1 {
		t.Fatalf("pending %d", n)
	}
	c.Cut()
	start := time.Now()
	_, e1 := st.Ask(call, eff, nil)
	_, e2 := st.Decide(boss, ap.ID, true)
	_, e3 := st.Claim(call, ap.ID)
	_, e4 := st.List(boss)
	if e1 == nil || e2 == nil || e3 == nil || e4 == nil {
		t.Fatalf("an operation succeeded with the state down: %v %v %v %v", e1, e2, e3, e4)
	}
	for i, e := range []error{e1, e2, e3, e4} {
		if !strings.Contains(e.Error(), "state database does not answer") {
			t.Fatalf("operation %d with the state down: %v", i, e)
		}
	}
	if e1.Type != "connection_error" || !strings.Contains(e1.Suggestion, "Retry") {
		t.Fatalf("the answer: %+v", e1)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("four refusals took %s", d)
	}
	if n := st.Counts().Pending; n != 1 {
		t.Fatalf("counts with the state down: %d", n)
	}
	if _, err := s.Replicas(context.Background()); err == nil {
		t.Fatal("the registry answered with the state down")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(failures) < 4 {
		t.Fatalf("the operator's log got %v", failures)
	}
	if n := db.QueryInt(t, `SELECT count(*) FROM pgtools.approvals`); n != 1 {
		t.Fatalf("%d requests after the outage", n)
	}
}

// TestRegistry: replicas register, beat, are listed while live and found by tag; a replica
// that stops beating is dead (Owner: not live); a clean stop removes it (ErrNoReplica); a
// restarted replica under its own id takes its row over; a replica claiming a live replica's
// tag under another id is refused.
func TestRegistry(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	a := open(t, pool(t, db.DSN), "")
	b := open(t, pool(t, db.DSN), "")
	if err := a.Register(ctx, Replica{ID: "pod-a", Tag: "aaaaaaaa", Address: "http://10.0.0.1:8080"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Register(ctx, Replica{ID: "pod-b", Tag: "bbbbbbbb", Address: "http://10.0.0.2:8080"}); err != nil {
		t.Fatal(err)
	}
	live, err := a.Replicas(ctx)
	if err != nil || len(live) != 2 || live[0].ID != "pod-a" || live[1].Address != "http://10.0.0.2:8080" || live[0].Seen.IsZero() {
		t.Fatalf("live: %+v %v", live, err)
	}
	if r, ok, err := b.Owner(ctx, "aaaaaaaa"); err != nil || !ok || r.ID != "pod-a" {
		t.Fatalf("owner: %+v %v %v", r, ok, err)
	}
	if _, _, err := b.Owner(ctx, "cccccccc"); !errors.Is(err, ErrNoReplica) {
		t.Fatalf("an unknown tag: %v", err)
	}

	// Another replica claims pod-a's tag while pod-a lives: refused, nothing changed.
	c := open(t, pool(t, db.DSN), "")
	err = c.Register(ctx, Replica{ID: "pod-c", Tag: "aaaaaaaa", Address: "http://10.0.0.3:8080"})
	if !errors.Is(err, ErrTagTaken) || !strings.Contains(err.Error(), "live replica pod-a holds it") {
		t.Fatalf("a tag clash: %v", err)
	}
	if r, _, _ := b.Owner(ctx, "aaaaaaaa"); r.ID != "pod-a" {
		t.Fatalf("the clash changed the owner to %s", r.ID)
	}
	// pod-a restarts under its own id: it takes its row over.
	if err := c.Register(ctx, Replica{ID: "pod-a", Tag: "aaaaaaaa", Address: "http://10.0.0.9:8080"}); err != nil {
		t.Fatal(err)
	}
	if r, _, _ := b.Owner(ctx, "aaaaaaaa"); r.Address != "http://10.0.0.9:8080" {
		t.Fatalf("the restarted replica's address: %s", r.Address)
	}

	// pod-b stops beating: past the bound it is dead, not forgotten.
	db.Exec(t, `UPDATE pgtools.replicas SET heartbeat = now() - interval '1 minute' WHERE replica_id = 'pod-b'`)
	if r, ok, err := a.Owner(ctx, "bbbbbbbb"); err != nil || ok || r.ID != "pod-b" {
		t.Fatalf("a dead owner: %+v %v %v", r, ok, err)
	}
	if live, _ := a.Replicas(ctx); len(live) != 1 {
		t.Fatalf("live after a death: %+v", live)
	}
	// A dead replica's tag may be taken.
	if err := open(t, pool(t, db.DSN), "").Register(ctx, Replica{ID: "pod-d", Tag: "bbbbbbbb", Address: "x"}); err != nil {
		t.Fatalf("taking a dead replica's tag: %v", err)
	}
	// A beat brings a replica whose row went back.
	db.Exec(t, `DELETE FROM pgtools.replicas WHERE replica_id = 'pod-a'`)
	if err := c.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.Owner(ctx, "aaaaaaaa"); err != nil || !ok {
		t.Fatalf("after a beat: %v %v", ok, err)
	}
	// A clean stop: gone.
	if err := c.Deregister(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Owner(ctx, "aaaaaaaa"); !errors.Is(err, ErrNoReplica) {
		t.Fatalf("after deregistering: %v", err)
	}
}

// TestSignIns: a sign-in stored by one replica is read by another; the outcome of a decision is
// taken once, whoever takes it; an ended or deleted sign-in is gone, and storing one drops the
// sign-ins that have ended.
func TestSignIns(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	a := open(t, pool(t, db.DSN), "")
	b := open(t, pool(t, db.DSN), "")
	key, ended := [32]byte{1}, [32]byte{2}
	if err := a.PutSignIn(ctx, key, SignIn{Principal: []byte(`{"name":"alice"}`), CSRF: "c1", Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := a.PutSignIn(ctx, ended, SignIn{Principal: []byte(`{"name":"bob"}`), CSRF: "c2", Expires: time.Now().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	in, ok, err := b.GetSignIn(ctx, key)
	if err != nil || !ok || in.CSRF != "c1" || !strings.Contains(string(in.Principal), "alice") {
		t.Fatalf("another replica reads the sign-in: %v %v %+v", err, ok, in)
	}
	if _, ok, err := b.GetSignIn(ctx, ended); err != nil || ok {
		t.Fatalf("an ended sign-in is read: %v %v", err, ok)
	}
	if err := a.SetFlash(ctx, key, "Approved apr_1", false); err != nil {
		t.Fatal(err)
	}
	if msg, isErr, err := b.TakeFlash(ctx, key); err != nil || msg != "Approved apr_1" || isErr {
		t.Fatalf("the outcome on another replica: %q %v %v", msg, isErr, err)
	}
	if msg, _, err := a.TakeFlash(ctx, key); err != nil || msg != "" {
		t.Fatalf("the outcome shown twice: %q %v", msg, err)
	}
	if err := a.PutSignIn(ctx, [32]byte{3}, SignIn{Principal: []byte(`{}`), CSRF: "c3", Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if n := db.QueryInt(t, `SELECT count(*) FROM pgtools.signins WHERE expires <= now()`); n != 0 {
		t.Fatalf("%d ended sign-ins kept after a new one was stored", n)
	}
	if err := b.DeleteSignIn(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.GetSignIn(ctx, key); err != nil || ok {
		t.Fatalf("a deleted sign-in is read: %v %v", err, ok)
	}
}
