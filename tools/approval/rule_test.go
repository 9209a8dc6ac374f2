package approval

import "testing"

// TestRuleValidation: every kind takes exactly its fields; an unknown kind is refused at load,
// and matches every write if it ever gets past that.
func TestRuleValidation(t *testing.T) {
	bad := []Rule{{When: "sometimes"}, {When: ""}, {When: WhenRowsOver, Rows: -1}, {When: WhenDDL, Rows: 3},
		{When: WhenTable}, {When: WhenTool}, {When: WhenDDL, Table: "t"}, {When: WhenTable, Table: "t", Tool: "x"}}
	for _, r := range bad {
		if r.Validate() == nil {
			t.Errorf("%+v validated", r)
		}
	}
	if !(Rule{When: "sometimes"}).Matches("insert_data", Effect{}) {
		t.Fatal("a rule of an unknown kind let a write through")
	}
}
