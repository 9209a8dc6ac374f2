package pgtest

import (
	"fmt"
	"testing"
)

// Example runs f with a fresh database of its own, for an Example function (which has no
// *testing.T): the database is created as New creates it and dropped when f returns. A failure
// of pgtest itself (no server, a failed statement) ends f and is printed in place of the rest of
// its output, so the example's "// Output:" comparison fails and names it.
func Example(f func(d *DB)) {
	e := &exampleTB{}
	current = e
	defer e.cleanup()
	defer func() {
		if r := recover(); r != nil {
			if msg, ok := r.(exampleFailure); ok {
				fmt.Println(string(msg))
				return
			}
			panic(r)
		}
	}()
	f(New(e))
}

// ExampleTB returns a testing.TB for the pgtest calls an example makes inside Example's f (such as
// DB.RoleDSN and OpenPool): its Fatal ends f as Example describes, and its Cleanup runs when
// Example returns. Only the methods pgtest calls are implemented; any other panics.
func ExampleTB() testing.TB { return current }

// current is the exampleTB of the Example running now: examples run one at a time.
var current *exampleTB

type exampleFailure string

// exampleTB is the testing.TB an example gives pgtest. Embedding the interface satisfies its
// unexported method; every method pgtest calls is defined here.
type exampleTB struct {
	testing.TB
	cleanups []func()
}

func (e *exampleTB) Helper()                         {}
func (e *exampleTB) Name() string                    { return "example" }
func (e *exampleTB) Cleanup(f func())                { e.cleanups = append(e.cleanups, f) }
func (e *exampleTB) Fatal(args ...any)               { panic(exampleFailure(fmt.Sprint(args...))) }
func (e *exampleTB) Fatalf(format string, a ...any)  { panic(exampleFailure(fmt.Sprintf(format, a...))) }
func (e *exampleTB) Errorf(format string, a ...any)  { fmt.Printf(format+"\n", a...) }
func (e *exampleTB) Skip(args ...any)                { e.Fatal(args...) }
func (e *exampleTB) Skipf(format string, a ...any)   { e.Fatalf(format, a...) }
func (e *exampleTB) Logf(format string, args ...any) {}

func (e *exampleTB) cleanup() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
	current = nil
}
