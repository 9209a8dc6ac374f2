// Package toolstest builds tools registries for tests outside package tools (runner,
// tools/session, runner/taskbroker): a pool configured as pgtools configures it, over a DSN the
// test gives, closed when the test ends. It is for tests only.
package toolstest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgtools/pgtools/tools"
)

// Database opens a pool of maxConns connections to dsn with tools.PoolConfig and wraps it as the
// "default" database under policy. The pool closes when the test ends.
func Database(t testing.TB, dsn string, policy tools.Policy, maxConns int32) *tools.Database {
	t.Helper()
	cfg, err := tools.PoolConfig(dsn, policy, maxConns)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return tools.NewDatabase("default", pool, policy)
}

// Registry is a registry over Database(t, dsn, policy, maxConns).
func Registry(t testing.TB, dsn string, policy tools.Policy, maxConns int32) *tools.Registry {
	t.Helper()
	reg, err := tools.NewRegistry([]*tools.Database{Database(t, dsn, policy, maxConns)})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}
