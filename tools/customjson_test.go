package tools

import (
	"encoding/json"
	"testing"
)

// TestCustomToolJSON: a custom tool decodes from the config file's spelling (items as a JSON
// Schema object, integer defaults and enums kept as the integers they are) and encodes back to
// the same document, so check-config prints what the file says.
func TestCustomToolJSON(t *testing.T) {
	t.Parallel()
	const doc = `{"name":"orders_of","description":"d","database":"default","sql":"SELECT $1, $2, $3","mode":"read","parameters":[` +
		`{"name":"ids","type":"array","items":{"type":"integer"},"required":true},` +
		`{"name":"limit","type":"integer","default":10,"enum":[10,20],"minimum":1,"maximum":100},` +
		`{"name":"status","type":"string","description":"s","maxLength":20}]}`
	var tool CustomTool
	if err := json.Unmarshal([]byte(doc), &tool); err != nil {
		t.Fatal(err)
	}
	ids, limit := tool.Parameters[0], tool.Parameters[1]
	if ids.Items != "integer" || !ids.Required {
		t.Errorf("ids: %+v", ids)
	}
	if d, ok := limit.Default.(json.Number); !ok || d.String() != "10" || len(limit.Enum) != 2 || limit.Enum[1] != json.Number("20") {
		t.Errorf("limit default %#v enum %#v, want json.Number 10 and [10 20]", limit.Default, limit.Enum)
	}
	if *limit.Minimum != 1 || *limit.Maximum != 100 || tool.Parameters[2].MaxLength != 20 {
		t.Errorf("bounds: %+v %+v", limit, tool.Parameters[2])
	}
	out, err := json.Marshal(tool)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	_ = json.Unmarshal([]byte(doc), &a)
	_ = json.Unmarshal(out, &b)
	if ja, _ := json.Marshal(a); string(ja) != string(mustJSON(t, b)) {
		t.Errorf("round trip:\n got %s\nwant %s", out, doc)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
