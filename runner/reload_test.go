package runner

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/config"
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
	logs := &syncBuffer{}
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
	for _, want := range []string{"databases.default.max_conns", "databases.default.statement_timeout", "need a restart"} {
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

// TestPoolChangesCoverWhatThePoolCarries walks every field of tools.Policy and DatabaseConfig:
// each one that changes the pool configuration tools.PoolConfig builds must be named by
// poolChanges, or a reload would apply it to a policy whose pool still runs the old value.
func TestPoolChangesCoverWhatThePoolCarries(t *testing.T) {
	t.Parallel()
	const dsn = "postgres://u@127.0.0.1:1/d"
	carried := func(d config.DatabaseConfig) string {
		c, err := tools.PoolConfig(d.URL, d.Policy, d.MaxConns)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(c.ConnConfig.RuntimeParams, c.ConnConfig.DefaultQueryExecMode, c.MaxConns, c.ConnConfig.Host)
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
	for i := 0; i < pt.NumField(); i++ {
		d := base
		set(reflect.ValueOf(&d.Policy).Elem().Field(i))
		if carried(d) != carried(base) && len(poolChanges(base, d)) == 0 {
			t.Errorf("Policy.%s changes the pool, but poolChanges does not name it", pt.Field(i).Name)
		}
	}
	d := base
	d.URL, d.Password, d.MaxConns = "postgres://u@127.0.0.2:1/d", "p", 9
	if got := poolChanges(base, d); strings.Join(got, ",") != "url,password,max_conns" {
		t.Errorf("poolChanges(url, password, max_conns) = %v", got)
	}
}
