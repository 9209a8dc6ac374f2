package wire

import (
	"bytes"
	"encoding/json"
	"testing"
)

// typicalArgs is an argument object of the size agents send: an insert of a few rows.
var typicalArgs = []byte(`{"table":"orders","rows":[{"id":1,"customer_id":42,"status":"new","total":"19.90","note":"first order"},` +
	`{"id":2,"customer_id":43,"status":"paid","total":"5.00","note":null},{"id":3,"customer_id":44,"status":"new","total":"120.00","note":"gift"}],` +
	`"returning":["id","status"],"autocommit":true}`)

// BenchmarkUnmarshal is wire.Unmarshal (duplicate keys checked) on a typical argument object;
// BenchmarkUnmarshalPlain the decode alone, as it was before the check.
func BenchmarkUnmarshal(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		var v any
		if err := Unmarshal(typicalArgs, &v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnmarshalPlain(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		var v any
		dec := json.NewDecoder(bytes.NewReader(typicalArgs))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckKeys(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if checkKeys(typicalArgs) != nil {
			b.Fatal("duplicate")
		}
	}
}
