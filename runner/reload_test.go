package runner

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/n8n/brokertest"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
)

// TestReloadPolicyPoolsAndDatabaseSet: a reload applies a database's policy to new calls, keeps
// the pool and the settings its connections carry (logged as needing a restart), and refuses a
// config that adds or removes a database, keeping the previous generation.
func TestReloadPolicyPoolsAndDatabaseSet(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, `CREATE TABLE notes (id int PRIMARY KEY)`)
	dsn := db.RoleDSN(t, "rl")
	db.Exec(t, `GRANT INSERT ON notes TO "`+db.RoleName("rl")+`"`)
	config := func(pol tools.Policy, maxConns int32, extra bool) func() (*config.Config, error) {
		return func() (*config.Config, error) {
			c := &config.Config{Databases: map[string]config.DatabaseConfig{"default": {URL: dsn, MaxConns: maxConns, Policy: pol}}}
			if extra {
				c.Databases["reports"] = config.DatabaseConfig{URL: dsn}
			}
			return c, c.Validate()
		}
	}
	first, _ := config(tools.Policy{StatementTimeout: 7 * time.Second}, 3, false)()
	logs := &pgtest.SyncBuffer{}
	rt, err := Build(context.Background(), first, zerolog.New(logs), BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	p := tools.Principal{Name: "local", Scopes: []string{"read", "write"}}
	insert := func(id string) *tools.Error {
		_, _, e := rt.Registry().Call(context.Background(), p, "insert_data", []byte(`{"table":"notes","autocommit":true,"row":{"id":`+id+`}}`))
		return e
	}
	if e := insert("1"); e != nil {
		t.Fatalf("insert before the reload: %v", e)
	}
	before, _ := rt.Registry().Database("default")

	if err := rt.Reload(context.Background(), config(tools.Policy{ReadOnly: true, StatementTimeout: time.Second}, 5, false)); err != nil {
		t.Fatal(err)
	}
	if e := insert("2"); e == nil || e.Type != tools.ErrNotAllowed {
		t.Fatalf("insert after read_only was reloaded: %v, want not_allowed", e)
	}
	after, _ := rt.Registry().Database("default")
	if after.Pool != before.Pool || after.Policy.StatementTimeout != 7*time.Second {
		t.Errorf("the reload replaced the pool or its statement_timeout (%v)", after.Policy.StatementTimeout)
	}
	for _, want := range []string{"databases.default.max_conns", "databases.default.policy.statement_timeout_ms", "need a restart"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, logs.String())
		}
	}

	if err := rt.Reload(context.Background(), config(tools.Policy{}, 3, true)); err == nil || !strings.Contains(err.Error(), "reports") {
		t.Fatalf("reload adding a database: %v, want a refusal naming it", err)
	}
	if n, _ := rt.Generation(); n != 2 {
		t.Errorf("generation %d after a refused reload, want 2", n)
	}
	if e := insert("3"); e == nil || e.Type != tools.ErrNotAllowed {
		t.Errorf("the refused config's policy took effect: %v", e)
	}
}

// TestPoolPolicyKeepsWhatThePoolCarries walks every field of tools.Policy and DatabaseConfig:
// each one that changes the pool configuration tools.PoolConfig builds must be kept by
// poolPolicy, and its key must need a restart in reloadTable, or a reload would apply it to a
// policy whose pool still runs the old value.
func TestPoolPolicyKeepsWhatThePoolCarries(t *testing.T) {
	t.Parallel()
	const dsn = "postgres://u@127.0.0.1:1/d"
	carried := func(d config.DatabaseConfig) string {
		c, err := tools.PoolConfig(d.URL, d.Policy, d.MaxConns)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(c.ConnConfig.RuntimeParams, c.ConnConfig.DefaultQueryExecMode, c.MaxConns, c.ConnConfig.Host)
	}
	// restartKeys are the keys config.Changes finds between base and d, each of which must need
	// a restart.
	restartKeys := func(base, d config.DatabaseConfig) []string {
		t.Helper()
		was := &config.Config{Databases: map[string]config.DatabaseConfig{"default": base}}
		now := &config.Config{Databases: map[string]config.DatabaseConfig{"default": d}}
		if err := was.Validate(); err != nil {
			t.Fatal(err)
		}
		if err := now.Validate(); err != nil {
			t.Fatal(err)
		}
		changes, err := config.Changes(was, now)
		if err != nil {
			t.Fatal(err)
		}
		// A key whose default follows the pool's (transaction_timeout_ms) may change beside it.
		var keys []string
		for _, c := range changes {
			if reloadTable[c.Key] == needsRestart {
				keys = append(keys, c.Key)
			}
		}
		return keys
	}
	base := config.DatabaseConfig{URL: dsn}
	set := func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Int, reflect.Int32, reflect.Int64:
			v.SetInt(int64(3 * time.Second))
			if v.Type() != reflect.TypeOf(time.Duration(0)) {
				v.SetInt(7)
			}
		case reflect.Float64:
			v.SetFloat(7.5)
		case reflect.String:
			v.SetString("x")
		case reflect.Slice:
			if v.Type().Elem().Kind() == reflect.String {
				v.Set(reflect.ValueOf([]string{"x"}))
			} else {
				v.Set(reflect.MakeSlice(v.Type(), 1, 1)) // one zero element: a list that is set
			}
		case reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem())) // a pointer to false: the opposite of the default
		default:
			t.Fatalf("field of kind %s: teach this test to set it", v.Kind())
		}
	}
	pt := reflect.TypeOf(tools.Policy{})
	pooled := 0
	for i := 0; i < pt.NumField(); i++ {
		d := base
		set(reflect.ValueOf(&d.Policy).Elem().Field(i))
		if carried(d) == carried(base) {
			continue
		}
		pooled++
		kept := base
		kept.Policy = poolPolicy(base.Policy, d.Policy)
		if carried(kept) != carried(base) {
			t.Errorf("Policy.%s changes the pool, but poolPolicy does not keep it", pt.Field(i).Name)
		}
		if len(restartKeys(base, d)) == 0 {
			t.Errorf("Policy.%s changes the pool, but reloadTable applies every key it changes live", pt.Field(i).Name)
		}
	}
	if pooled < 2 {
		t.Errorf("only %d policy fields change the pool", pooled)
	}
	d := base
	d.URL, d.MaxConns = "postgres://u@127.0.0.2:1/d", 9
	if got := strings.Join(restartKeys(base, d), ","); got != "databases.*.max_conns,databases.*.url" {
		t.Errorf("changes of url and max_conns: %v", got)
	}
}

// TestReloadTableCoversTheSchema walks every key of schemas/config.schema.json: each must have
// an entry in reloadTable (a key without one would need a restart, silently), and every entry
// must be a key of the schema.
func TestReloadTableCoversTheSchema(t *testing.T) {
	t.Parallel()
	keys, err := config.SchemaKeys()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) < 100 {
		t.Fatalf("the schema has only %d keys: %v", len(keys), keys)
	}
	inSchema := map[string]bool{}
	for _, k := range keys {
		inSchema[k] = true
		if _, ok := reloadTable[k]; !ok {
			t.Errorf("%s: no entry in reloadTable; say whether a reload applies it (appliesLive) or it needs a restart (needsRestart)", k)
		}
	}
	for k := range reloadTable {
		if !inSchema[k] {
			t.Errorf("reloadTable has %s, which is no key of the schema", k)
		}
	}
}

// TestReloadAppliesTaskTimeoutAndReportsRestarts: Build joins the n8n broker of the config; a
// reload that lowers n8n.task_timeout_ms applies it to the next task, which ends at the new
// bound, while a changed listen address is reported as needing a restart (logged, in
// PendingRestart and pgtools_config_restart_pending) until a reload brings it back.
func TestReloadAppliesTaskTimeoutAndReportsRestarts(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	dsn := db.RoleDSN(t, "rlb")
	const brokerToken = "n8n-runners-auth-token-for-reload-0123"
	b := brokertest.New(t, brokerToken)
	load := func(timeoutMS int64, listen string) func() (*config.Config, error) {
		return func() (*config.Config, error) {
			c := &config.Config{Listen: listen, Databases: map[string]config.DatabaseConfig{"default": {URL: dsn}},
				N8N: config.N8NConfig{Brokers: []string{b.URL}, Token: brokerToken, TaskTimeoutMS: timeoutMS}}
			return c, c.Validate()
		}
	}
	first, err := load(60_000, "127.0.0.1:0")()
	if err != nil {
		t.Fatal(err)
	}
	logs := &pgtest.SyncBuffer{}
	rt, err := Build(context.Background(), first, zerolog.New(logs), BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	rn := b.NextRunner(t, 10*time.Second)

	if err := rt.Reload(context.Background(), load(2000, "127.0.0.1:1")); err != nil {
		t.Fatal(err)
	}
	if got := rt.PendingRestart(); strings.Join(got, ",") != "listen" {
		t.Errorf("PendingRestart after changing listen: %v, want [listen]", got)
	}
	for _, want := range []string{`"applied":["n8n.task_timeout_ms"]`, `"settings":["listen"]`, "need a restart"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the reload's log lacks %s:\n%s", want, logs.String())
		}
	}
	if got := metricSample(t, rt, "pgtools_config_restart_pending"); got != "1" {
		t.Errorf("pgtools_config_restart_pending = %s, want 1", got)
	}
	slow := rn.StartTask(t, map[string]any{"tool": "execute_sql", "args": map[string]any{"sql": "select pg_sleep(20)"}})
	if ans := rn.Answer(t, slow, 10*time.Second); ans.Type != "runner:taskerror" || !strings.Contains(string(ans.Error), "n8n's task timeout (2 s)") {
		t.Fatalf("a task after the reload to 2 s: %s", ans.Raw)
	}

	if err := rt.Reload(context.Background(), load(2000, "127.0.0.1:0")); err != nil {
		t.Fatal(err)
	}
	if got := rt.PendingRestart(); len(got) != 0 {
		t.Errorf("PendingRestart once listen is back: %v", got)
	}
	if got := metricSample(t, rt, "pgtools_config_restart_pending"); got != "0" {
		t.Errorf("pgtools_config_restart_pending = %s, want 0", got)
	}
}

// metricSample is the value of a sample without labels on the runtime's /metrics.
func metricSample(t *testing.T, rt *Runtime, name string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	rt.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	t.Fatalf("%s not on /metrics:\n%s", name, rec.Body.String())
	return ""
}
