package n8n_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/runner/n8n"
	"github.com/pgtools/pgtools/runner/n8n/brokertest"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/toolstest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const authToken = "broker-auth-token-0123456789abcdef"

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer = pgtest.SyncBuffer

// fixture is one test's database, registry, broker stand-in and running client.
type fixture struct {
	db     *pgtest.DB
	role   string // the runner's database role
	reg    *tools.Registry
	broker *brokertest.Broker
	client *n8n.Client
	logs   *syncBuffer
	stop   func() // cancels Run and waits for it to return
	done   chan struct{}
}

// newFixture builds a registry over a fresh database with a table orders (5 rows, writable by
// the runner's role), a broker stand-in, and a client running against it; opt adjusts the
// client's options.
func newFixture(t *testing.T, opt func(*n8n.Options)) *fixture {
	t.Helper()
	db := pgtest.New(t)
	db.Exec(t, `CREATE TABLE orders (id int PRIMARY KEY, status text); INSERT INTO orders SELECT i, 'paid' FROM generate_series(1, 5) i`)
	dsn := db.RoleDSN(t, "tb")
	db.Exec(t, `GRANT INSERT, UPDATE, DELETE ON orders TO "`+db.RoleName("tb")+`"`)
	reg := toolstest.Registry(t, dsn, tools.Policy{}, 8)
	f := &fixture{db: db, role: db.RoleName("tb"), reg: reg, broker: brokertest.New(t, authToken), logs: &syncBuffer{}, done: make(chan struct{})}
	opts := n8n.Options{
		URL: f.broker.URL, AuthToken: authToken, Caller: reg,
		Principal:  tools.Principal{Name: "n8n-broker", Scopes: []string{"read", "write"}},
		Log:        zerolog.New(f.logs).Level(zerolog.DebugLevel),
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		Concurrency: 3, Grace: 5 * time.Second,
	}
	if opt != nil {
		opt(&opts)
	}
	c, err := n8n.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	f.client = c
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(f.done)
		if err := c.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var once sync.Once
	f.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-f.done:
			case <-time.After(15 * time.Second):
				t.Errorf("Run did not return after its context ended")
			}
		})
	}
	// Stop the client before the broker and the pool go away (cleanups run last-in first-out).
	t.Cleanup(f.stop)
	return f
}

// httpAnswer calls the tool through the HTTP API over the same registry and returns the body.
func (f *fixture) httpAnswer(t *testing.T, tool, args string) []byte {
	t.Helper()
	srv := httptest.NewServer(httpapi.NewHandler(f.reg, nil, zerolog.Nop(), 1<<20))
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/tools/"+tool, "application/json", strings.NewReader(args))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return body
}

// startSleeping starts an execute_sql task running sql, a pg_sleep, on rn, waits until the
// statement runs on the server, and returns the task id.
func (f *fixture) startSleeping(t *testing.T, rn *brokertest.Runner, sql string) string {
	t.Helper()
	taskID := rn.StartTask(t, map[string]any{"tool": "execute_sql", "args": map[string]any{"sql": sql}})
	f.waitSleeps(t, 1, 5*time.Second)
	return taskID
}

// assertAlive fails the test unless rn answers a ping within 2 s: its connection outlived what
// the test did to it.
func assertAlive(t *testing.T, rn *brokertest.Runner) {
	t.Helper()
	if !rn.Ping(2 * time.Second) {
		t.Fatal("the runner did not answer a ping")
	}
}

// activeSleeps counts the runner role's statements running pg_sleep.
func (f *fixture) activeSleeps(t *testing.T) int64 {
	return f.db.QueryInt(t, `SELECT count(*) FROM pg_stat_activity WHERE usename = $1 AND state = 'active' AND query LIKE '%pg_sleep%'`, f.role)
}

// waitSleeps polls until activeSleeps is want, for up to timeout, and returns how long it took.
func (f *fixture) waitSleeps(t *testing.T, want int64, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		n := f.activeSleeps(t)
		if n == want {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("%d pg_sleep statements active after %v, want %d", n, timeout, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// withoutTime drops executionTime and masks next_page, the fields two identical calls may differ
// in: a page token is dated and bound to its caller (the broker and an HTTP token are two).
func withoutTime(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("not a JSON object: %s", raw)
	}
	delete(m, "executionTime")
	if tok, ok := m["next_page"].(string); ok && tok != "" {
		m["next_page"] = "<token>"
	}
	return m
}

func isOffer(m brokertest.Message) bool { return m.Type == "runner:taskoffer" }

// waitOpenOffers waits until the runner has n offers the test has not used.
func waitOpenOffers(t *testing.T, rn *brokertest.Runner, n int) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Second); len(rn.OpenOffers()) != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d open offers, want %d", len(rn.OpenOffers()), n)
		}
	}
}

func TestHandshakeAndOffers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	rn := f.broker.NextRunner(t, 5*time.Second)

	if rn.Info.Name != "pgtools" || !slices.Equal(rn.Info.Types, []string{"pgtools"}) {
		t.Fatalf("runner:info = %s, want name pgtools and types [pgtools] only", rn.Info.Raw)
	}
	if !strings.HasPrefix(rn.ID, "pgtools-") {
		t.Errorf("runner id %q", rn.ID)
	}
	if grants := f.broker.Grants(); len(grants) != 1 || grants[0] != rn.Grant {
		t.Fatalf("the runner did not connect with the grant it was issued")
	}
	// Offers come only after broker:runnerregistered (the stand-in sends it after runner:info),
	// as many as the concurrency limit, never expiring, and no more while they are outstanding.
	waitOpenOffers(t, rn, 3)
	time.Sleep(150 * time.Millisecond)
	msgs := rn.Messages()
	if msgs[0].Type != "runner:info" {
		t.Fatalf("first message is %s, want runner:info", msgs[0].Raw)
	}
	offers := msgs[1:]
	seen := map[string]bool{}
	for _, m := range offers {
		if m.Type != "runner:taskoffer" || m.TaskType != "pgtools" || m.ValidFor != -1 || m.OfferID == "" || seen[m.OfferID] {
			t.Fatalf("unexpected message %s", m.Raw)
		}
		seen[m.OfferID] = true
	}
	if len(offers) != 3 {
		t.Fatalf("%d offers outstanding, want 3", len(offers))
	}
	assertAlive(t, rn)
}

func TestTasksAnswerLikeHTTP(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	rn := f.broker.NextRunner(t, 5*time.Second)

	cases := []struct {
		name      string
		settings  string
		tool      string // for the HTTP twin; "" skips the comparison
		httpArgs  string
		errorType string // "" for runner:taskdone
	}{
		{"select", `{"tool":"select_query","args":{"table":"orders","order_by":"id","limit":2}}`,
			"select_query", `{"table":"orders","order_by":"id","limit":2}`, ""},
		{"args as a JSON string, database merged", `{"tool":"select_query","args":"{\"table\":\"orders\",\"where\":\"id = $1\",\"params\":[3]}","database":"default"}`,
			"select_query", `{"table":"orders","where":"id = $1","params":[3],"database":"default"}`, ""},
		{"no args", `{"tool":"describe_schema"}`, "describe_schema", `{}`, ""},
		{"unknown column", `{"tool":"select_query","args":{"table":"orders","columns":"idd"}}`,
			"select_query", `{"table":"orders","columns":"idd"}`, "invalid_column"},
		{"unknown tool", `{"tool":"drop_everything","args":{}}`, "drop_everything", `{}`, "unknown_tool"},
		{"invalid arguments", `{"tool":"select_query","args":{"tabel":"orders"}}`, "select_query", `{"tabel":"orders"}`, "invalid_arguments"},
		{"write without intent", `{"tool":"insert_data","args":{"table":"orders","row":{"id":7}}}`,
			"insert_data", `{"table":"orders","row":{"id":7}}`, "write_intent_required"},
		{"settings without tool", `{"args":{"table":"orders"}}`, "", "", "invalid_arguments"},
		{"settings with an unknown key", `{"tool":"select_query","arguments":{"table":"orders"}}`, "", "", "invalid_arguments"},
		{"settings not an object", `"select_query"`, "", "", "invalid_arguments"},
		{"args not an object", `{"tool":"select_query","args":[1]}`, "", "", "invalid_arguments"},
		{"two databases", `{"tool":"select_query","args":{"table":"orders","database":"other"},"database":"default"}`, "", "", "invalid_arguments"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			taskID := rn.StartTask(t, json.RawMessage(c.settings))
			ans := rn.Answer(t, taskID, 5*time.Second)
			var got []byte
			if c.errorType == "" {
				if ans.Type != "runner:taskdone" {
					t.Fatalf("got %s", ans.Raw)
				}
				got = ans.Result()
			} else {
				if ans.Type != "runner:taskerror" {
					t.Fatalf("got %s", ans.Raw)
				}
				got = ans.Error
				e := withoutTime(t, got)
				if e["success"] != false || e["errorType"] != c.errorType || e["suggestion"] == "" || e["error"] == "" {
					t.Fatalf("error object %s, want errorType %s with a suggestion", got, c.errorType)
				}
			}
			if c.tool != "" {
				want := f.httpAnswer(t, c.tool, c.httpArgs)
				if g, w := withoutTime(t, got), withoutTime(t, want); !jsonEqual(g, w) {
					t.Fatalf("the task answered\n  %s\nHTTP answers\n  %s", got, want)
				}
			}
		})
	}

	t.Run("write with autocommit", func(t *testing.T) {
		taskID := rn.StartTask(t, map[string]any{"tool": "insert_data", "args": map[string]any{"table": "orders", "row": map[string]any{"id": 9, "status": "new"}, "autocommit": true}})
		ans := rn.Answer(t, taskID, 5*time.Second)
		if ans.Type != "runner:taskdone" || withoutTime(t, ans.Result())["affectedRows"] != float64(1) {
			t.Fatalf("got %s", ans.Raw)
		}
		if n := f.db.QueryInt(t, `SELECT count(*) FROM orders WHERE id = 9`); n != 1 {
			t.Fatalf("%d rows with id 9 after the insert", n)
		}
	})

	// Every answered task freed its slot, and a new offer took the used one's place.
	waitOpenOffers(t, rn, 3)
	if n := rn.Count(brokertest.IsType("runner:taskrejected")); n != 0 {
		t.Fatalf("%d tasks rejected", n)
	}
	if logs := f.logs.String(); !strings.Contains(logs, `"message":"tool call"`) || !strings.Contains(logs, `"principal":"n8n-broker"`) {
		t.Fatalf("no task log lines:\n%s", logs)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func TestCancelStopsTheStatement(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	rn := f.broker.NextRunner(t, 5*time.Second)

	taskID := f.startSleeping(t, rn, "select pg_sleep(20)")
	rn.Send(t, map[string]string{"type": "broker:taskcancel", "taskId": taskID, "reason": "Task execution timed out"})
	if took := f.waitSleeps(t, 0, time.Second); took > time.Second {
		t.Fatalf("the statement ran on for %v after the cancel", took)
	}
	// n8n has already told the node; the runner sends no answer, and frees the slot.
	waitOpenOffers(t, rn, 3)
	time.Sleep(100 * time.Millisecond)
	if n := rn.Count(func(m brokertest.Message) bool { return m.TaskID == taskID && m.Type != "runner:taskaccepted" }); n != 0 {
		t.Fatalf("the runner answered a cancelled task:\n%v", rn.Messages())
	}
	// The connection serves on.
	next := rn.StartTask(t, map[string]any{"tool": "select_query", "args": map[string]any{"table": "orders"}})
	if ans := rn.Answer(t, next, 5*time.Second); ans.Type != "runner:taskdone" {
		t.Fatalf("got %s", ans.Raw)
	}
}

func TestDrainFinishesInFlightAndOffersNoMore(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *n8n.Options) { o.Concurrency = 2 })
	rn := f.broker.NextRunner(t, 5*time.Second)
	waitOpenOffers(t, rn, 2)

	taskID := f.startSleeping(t, rn, "select pg_sleep(0.4) is null as slept")
	rn.Send(t, map[string]string{"type": "broker:drain"})
	ans := rn.Answer(t, taskID, 5*time.Second)
	if ans.Type != "runner:taskdone" {
		t.Fatalf("the task in flight did not finish after the drain: %s", ans.Raw)
	}
	time.Sleep(150 * time.Millisecond)
	if n := rn.Count(isOffer); n != 2 {
		t.Fatalf("%d offers in all, want the 2 made before the drain", n)
	}
	// The broker still holds the other offer; should it use it, the runner declines.
	late := rn.Accept(t)
	rej := rn.Wait(t, 2*time.Second, "runner:taskrejected", brokertest.ForTask("runner:taskrejected", late))
	if rej.Reason == "" {
		t.Fatalf("rejection without a reason: %s", rej.Raw)
	}
}

func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *n8n.Options) { o.Concurrency = 2 })
	rn := f.broker.NextRunner(t, 5*time.Second)

	sleep := map[string]any{"tool": "execute_sql", "args": map[string]any{"sql": "select pg_sleep(0.5) is null as slept"}}
	a, b := rn.StartTask(t, sleep), rn.StartTask(t, sleep)
	f.waitSleeps(t, 2, 5*time.Second)
	if n := len(rn.OpenOffers()); n != 0 {
		t.Fatalf("%d open offers at the concurrency limit", n)
	}
	// An accept beyond the limit (an offer the runner never made) is declined.
	rn.Send(t, map[string]string{"type": "broker:taskofferaccept", "taskId": "extra", "offerId": "never-offered"})
	rn.Wait(t, 2*time.Second, "runner:taskrejected", brokertest.ForTask("runner:taskrejected", "extra"))
	for _, id := range []string{a, b} {
		if ans := rn.Answer(t, id, 5*time.Second); ans.Type != "runner:taskdone" {
			t.Fatalf("got %s", ans.Raw)
		}
	}
	waitOpenOffers(t, rn, 2)
}

func TestReconnectsWithAFreshGrant(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	first := f.broker.NextRunner(t, 5*time.Second)
	waitOpenOffers(t, first, 3)

	// A task in flight when the broker goes away is cancelled with its connection: n8n has
	// failed it towards the node already.
	f.startSleeping(t, first, "select pg_sleep(20)")
	first.Drop()
	f.waitSleeps(t, 0, 2*time.Second)

	second := f.broker.NextRunner(t, 5*time.Second)
	grants := f.broker.Grants()
	if len(grants) != 2 || second.Grant != grants[1] || second.Grant == first.Grant {
		t.Fatalf("the runner did not reconnect with a fresh grant (%d grants issued)", len(grants))
	}
	if second.ID != first.ID {
		t.Errorf("runner id changed across reconnects: %s then %s", first.ID, second.ID)
	}
	waitOpenOffers(t, second, 3)
	taskID := second.StartTask(t, map[string]any{"tool": "select_query", "args": map[string]any{"table": "orders"}})
	if ans := second.Answer(t, taskID, 5*time.Second); ans.Type != "runner:taskdone" {
		t.Fatalf("got %s", ans.Raw)
	}

	// A broker that closes the connection (n8n shutting down) is rejoined too.
	second.Drop()
	third := f.broker.NextRunner(t, 5*time.Second)
	waitOpenOffers(t, third, 3)

	logs := f.logs.String()
	for _, secret := range append(f.broker.Grants(), authToken) {
		if strings.Contains(logs, secret) {
			t.Fatalf("the logs contain a token:\n%s", logs)
		}
	}
	if !strings.Contains(logs, "n8n task broker unavailable; retrying") {
		t.Fatalf("the lost connection was not logged:\n%s", logs)
	}
}

func TestWrongAuthTokenKeepsRetryingWithBackoff(t *testing.T) {
	t.Parallel()
	const wrong = "wrong-auth-token-fedcba9876543210"
	f := newFixture(t, func(o *n8n.Options) {
		o.AuthToken = wrong
		o.MinBackoff, o.MaxBackoff = 20*time.Millisecond, 160*time.Millisecond
	})
	var rejected []time.Time
	for deadline := time.Now().Add(5 * time.Second); len(rejected) < 6; time.Sleep(10 * time.Millisecond) {
		if rejected = f.broker.AuthRejections(); time.Now().After(deadline) {
			t.Fatalf("only %d grant-token attempts in 5 s", len(rejected))
		}
	}
	f.stop()
	first, last := rejected[1].Sub(rejected[0]), rejected[5].Sub(rejected[4])
	if last <= first || last < 80*time.Millisecond || last > 500*time.Millisecond {
		t.Fatalf("waits between attempts: first %v, fifth %v; want growing up to the 160 ms cap", first, last)
	}
	logs := f.logs.String()
	if strings.Contains(logs, wrong) || strings.Contains(logs, authToken) {
		t.Fatalf("the logs contain a token:\n%s", logs)
	}
	if !strings.Contains(logs, "the auth token is wrong; it must equal the N8N_RUNNERS_AUTH_TOKEN n8n runs with") {
		t.Fatalf("the logs do not say the auth token is wrong:\n%s", logs)
	}
	// Said once as a warning, not at every attempt.
	if n := strings.Count(logs, `"level":"warn"`); n != 1 {
		t.Fatalf("%d warnings for one repeated failure:\n%s", n, logs)
	}
}

func TestUnknownMessagesAreIgnored(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	rn := f.broker.NextRunner(t, 5*time.Second)
	waitOpenOffers(t, rn, 3)

	rn.Send(t, map[string]any{"type": "broker:somethingnew", "payload": map[string]int{"x": 1}})
	rn.Send(t, map[string]any{"type": "broker:taskdataresponse", "taskId": "t1", "requestId": "r1", "data": map[string]any{}})
	rn.Send(t, map[string]any{"type": "broker:tasksettings", "taskId": "never-accepted", "settings": map[string]any{"tool": "select_query"}})
	rn.SendRaw(t, []byte("not json"))
	rn.SendRaw(t, []byte(`[1,2,3]`))

	taskID := rn.StartTask(t, map[string]any{"tool": "select_query", "args": map[string]any{"table": "orders"}})
	if ans := rn.Answer(t, taskID, 5*time.Second); ans.Type != "runner:taskdone" {
		t.Fatalf("got %s", ans.Raw)
	}
	if n := rn.Count(brokertest.ForTask("runner:taskerror", "never-accepted")) + rn.Count(brokertest.ForTask("runner:taskdone", "never-accepted")); n != 0 {
		t.Fatal("the runner ran a task it never accepted")
	}
	assertAlive(t, rn)
}

func TestShutdownLetsTasksFinish(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	rn := f.broker.NextRunner(t, 5*time.Second)

	taskID := f.startSleeping(t, rn, "select pg_sleep(0.3) is null as slept")
	f.stop()
	if ans := rn.Answer(t, taskID, time.Second); ans.Type != "runner:taskdone" {
		t.Fatalf("the task in flight at shutdown did not deliver its answer: %s", ans.Raw)
	}
	select {
	case <-rn.Closed():
	case <-time.After(2 * time.Second):
		t.Fatal("the runner did not close its connection on shutdown")
	}
}

func TestShutdownCancelsTasksAfterGrace(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *n8n.Options) { o.Grace = 100 * time.Millisecond })
	rn := f.broker.NextRunner(t, 5*time.Second)

	f.startSleeping(t, rn, "select pg_sleep(20)")
	start := time.Now()
	f.stop()
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Run took %v to return with a 100 ms grace", took)
	}
	// Run returned after the call did, and the call returned after the server cancelled it.
	if n := f.activeSleeps(t); n != 0 {
		t.Fatalf("%d statements still running after shutdown", n)
	}
}

// When n8n misses the runner's accept it cancels the task and drops every offer it holds from
// the runner; the runner cannot tell that from other cancels before settings, so it offers
// afresh and declines the old offers, should the broker still hold and use them.
func TestCancelBeforeSettingsOffersAfresh(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	rn := f.broker.NextRunner(t, 5*time.Second)
	waitOpenOffers(t, rn, 3)
	old := rn.OpenOffers()

	taskID := rn.Accept(t)
	rn.Wait(t, 2*time.Second, "runner:taskaccepted", brokertest.ForTask("runner:taskaccepted", taskID))
	rn.Send(t, map[string]string{"type": "broker:taskcancel", "taskId": taskID, "reason": "Acknowledgement window elapsed"})
	waitOpenOffers(t, rn, 2+3)

	rn.Send(t, map[string]string{"type": "broker:taskofferaccept", "taskId": "stale", "offerId": old[1]})
	rn.Wait(t, 2*time.Second, "runner:taskrejected", brokertest.ForTask("runner:taskrejected", "stale"))
	fresh := rn.OpenOffers()[2]
	rn.Send(t, map[string]string{"type": "broker:taskofferaccept", "taskId": "fresh", "offerId": fresh})
	rn.Wait(t, 2*time.Second, "runner:taskaccepted", brokertest.ForTask("runner:taskaccepted", "fresh"))
}

func TestSettingsThatNeverComeFreeTheSlot(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *n8n.Options) { o.SettingsTimeout = 100 * time.Millisecond })
	rn := f.broker.NextRunner(t, 5*time.Second)
	waitOpenOffers(t, rn, 3)

	taskID := rn.Accept(t)
	rn.Wait(t, 2*time.Second, "runner:taskaccepted", brokertest.ForTask("runner:taskaccepted", taskID))
	ans := rn.Answer(t, taskID, 2*time.Second)
	if ans.Type != "runner:taskerror" || !strings.Contains(string(ans.Error), `"errorType":"internal_error"`) {
		t.Fatalf("got %s", ans.Raw)
	}
	waitOpenOffers(t, rn, 3)
}
