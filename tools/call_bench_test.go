package tools

import (
	"context"
	"strconv"
	"testing"
)

// BenchmarkSelectByPK measures one primary-key select_query through Registry.Call (no HTTP), with
// allocations; compare with BenchmarkRawPipelined for the overhead of the tool layer.
func BenchmarkSelectByPK(b *testing.B) {
	bn := newBundleConns(b, Policy{}, 1)
	args := make([][]byte, 50)
	for i := range args {
		args[i] = []byte(`{"table":"orders","where":"id = $1","params":[` + strconv.Itoa(i+1) + `]}`)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, e := bn.reg.Call(ctx, testPrincipal, "select_query", args[i%50]); e != nil {
			b.Fatal(e)
		}
	}
}
