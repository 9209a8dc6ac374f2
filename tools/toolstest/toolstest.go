// Package toolstest builds tools registries for tests outside package tools (runner,
// tools/session, runner/n8n): a pool configured as pgtools configures it, over a DSN the
// test gives, closed when the test ends. It is for tests only.
package toolstest

import (
	"context"
	"testing"

	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
)

// Database opens a pool of maxConns connections to dsn with tools.PoolConfig and wraps it as the
// "default" database under policy. The pool closes when the test ends.
func Database(t testing.TB, dsn string, policy tools.Policy, maxConns int32) *tools.Database {
	t.Helper()
	cfg, err := tools.PoolConfig(dsn, policy, maxConns)
	if err != nil {
		t.Fatal(err)
	}
	return tools.NewDatabase("default", pgtest.OpenPool(t, cfg), policy)
}

// Registry is a registry over Database(t, dsn, policy, maxConns).
func Registry(t testing.TB, dsn string, policy tools.Policy, maxConns int32) *tools.Registry {
	t.Helper()
	return RegistryWith(t, dsn, policy, maxConns, tools.Options{})
}

// RegistryWith is a registry built from o over Database(t, dsn, policy, maxConns) as the
// "default" database followed by o.Databases.
func RegistryWith(t testing.TB, dsn string, policy tools.Policy, maxConns int32, o tools.Options) *tools.Registry {
	t.Helper()
	o.Databases = append([]*tools.Database{Database(t, dsn, policy, maxConns)}, o.Databases...)
	reg, err := tools.NewRegistry(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// Caller is the method a transport calls tools through, as *tools.Registry has it (runner.Caller,
// which this package cannot import, is the same interface).
type Caller interface {
	Call(ctx context.Context, p tools.Principal, tool string, args []byte) (tools.Result, tools.Outcome, *tools.Error)
	Preview(ctx context.Context, p tools.Principal, tool string, args []byte) (tools.Preview, *tools.Error)
}

// PanicOn is a Caller that panics, as a bug would, in every call of Tool and passes every other
// call to Caller: for tests of how a transport survives a panicking tool.
type PanicOn struct {
	Caller Caller
	Tool   string
}

// Call panics with a runtime error when tool is p.Tool and otherwise calls p.Caller.
func (p PanicOn) Call(ctx context.Context, pr tools.Principal, tool string, args []byte) (tools.Result, tools.Outcome, *tools.Error) {
	if tool == p.Tool {
		var m map[string]int
		m["boom"]++ // a runtime error: assignment to entry in nil map
	}
	return p.Caller.Call(ctx, pr, tool, args)
}

// Preview passes every preview to Caller: only calls panic.
func (p PanicOn) Preview(ctx context.Context, pr tools.Principal, tool string, args []byte) (tools.Preview, *tools.Error) {
	return p.Caller.Preview(ctx, pr, tool, args)
}
