package tools

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestDescribeSchemaLists: without a table, describe_schema lists the tables the role may read,
// with their kind and comment.
func TestDescribeSchemaLists(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	// A table the role may not read is not listed.
	b.db.Exec(t, "CREATE TABLE hidden_secrets (k text); REVOKE ALL ON hidden_secrets FROM "+quoteIdent(b.db.RoleName("agent")))
	b.db.Exec(t, "CREATE VIEW paid_orders AS SELECT * FROM orders WHERE status = 'paid'")
	res, e := callAnswer[*SchemaResult](t, b, "describe_schema", `{}`)
	if e != nil {
		t.Fatal(errorJSON(t, e))
	}
	var list []tableSummary
	if err := json.Unmarshal(res.Data, &list); err != nil {
		t.Fatal(err)
	}
	want := []tableSummary{
		{Schema: "public", Name: "customers", Type: "table", Comment: "People who buy things"},
		{Schema: "public", Name: "orders", Type: "table"},
		{Schema: "public", Name: "paid_orders", Type: "view"},
	}
	if len(list) != len(want) {
		t.Fatalf("listed %+v, want %+v", list, want)
	}
	for i := range want {
		got := list[i]
		if got.EstimatedRows == nil {
			t.Fatalf("entry %d has no estimatedRows, though no row-level security applies", i)
		}
		got.EstimatedRows = nil // its value depends on ANALYZE
		if !reflect.DeepEqual(got, want[i]) {
			t.Fatalf("entry %d: %+v, want %+v", i, got, want[i])
		}
	}
	if res.RowCount == nil || *res.RowCount != len(want) || !strings.Contains(res.Hint, "describe_schema") {
		t.Fatalf("rowCount %d, hint %q", *res.RowCount, res.Hint)
	}

	// A schema filter narrows the list.
	res, e = callAnswer[*SchemaResult](t, b, "describe_schema", `{"schema":"nope"}`)
	if e != nil {
		t.Fatal(errorJSON(t, e))
	}
	if string(res.Data) != "[]" || res.Hint == "" {
		t.Fatalf("schema filter: %s, hint %q", res.Data, res.Hint)
	}
}

// TestDescribeSchemaTable: with a table, describe_schema gives columns (type, nullable,
// default), the primary key, foreign keys and indexes.
func TestDescribeSchemaTable(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	b.db.Exec(t, "COMMENT ON COLUMN orders.total IS 'Gross amount in EUR'")
	for _, args := range []string{`{"table":"orders"}`, `{"table":"public.orders"}`, `{"table":"orders","schema":"public"}`} {
		t.Run(args, func(t *testing.T) {
			t.Parallel()
			res, e := callAnswer[*SchemaResult](t, b, "describe_schema", args)
			if e != nil {
				t.Fatal(errorJSON(t, e))
			}
			if res.Table != "orders" {
				t.Fatalf("table %q", res.Table)
			}
			var d tableDetail
			if err := json.Unmarshal(res.Data, &d); err != nil {
				t.Fatal(err)
			}
			str := func(s string) *string { return &s }
			wantCols := []columnInfo{
				{Name: "id", Type: "bigint", Nullable: false},
				{Name: "customer_id", Type: "bigint", Nullable: true},
				{Name: "status", Type: "text", Nullable: false, Default: str("'pending'::text")},
				{Name: "total", Type: "numeric(12,2)", Nullable: true, Comment: "Gross amount in EUR"},
				{Name: "placed_at", Type: "timestamp with time zone", Nullable: true, Default: str("'2026-01-01 00:00:00+00'::timestamp with time zone")},
			}
			if len(d.Columns) != len(wantCols) {
				t.Fatalf("columns %+v", d.Columns)
			}
			for i, w := range wantCols {
				g := d.Columns[i]
				if g.Name != w.Name || g.Type != w.Type || g.Nullable != w.Nullable || g.Comment != w.Comment || (g.Default == nil) != (w.Default == nil) {
					t.Fatalf("column %d: %+v, want %+v", i, g, w)
				}
				if w.Default != nil && w.Name == "status" && *g.Default != *w.Default {
					t.Fatalf("default of %s: %q, want %q", w.Name, *g.Default, *w.Default)
				}
			}
			if d.Type != "table" || d.Schema != "public" || d.Name != "orders" {
				t.Fatalf("header %s.%s (%s)", d.Schema, d.Name, d.Type)
			}
			if len(d.PrimaryKey) != 1 || d.PrimaryKey[0] != "id" {
				t.Fatalf("primary key %v", d.PrimaryKey)
			}
			if len(d.ForeignKeys) != 1 {
				t.Fatalf("foreign keys %+v", d.ForeignKeys)
			}
			fk := d.ForeignKeys[0]
			if fk.ReferencesTable != "customers" || len(fk.Columns) != 1 || fk.Columns[0] != "customer_id" || len(fk.ReferencesColumns) != 1 || fk.ReferencesColumns[0] != "id" {
				t.Fatalf("foreign key %+v", fk)
			}
			var idx *indexInfo
			for i := range d.Indexes {
				if d.Indexes[i].Name == "orders_customer_idx" {
					idx = &d.Indexes[i]
				}
			}
			if idx == nil || idx.Unique || !strings.Contains(idx.Definition, "(customer_id)") {
				t.Fatalf("index orders_customer_idx missing or wrong: %+v", d.Indexes)
			}
			if len(d.Indexes) != 2 { // the primary key's index and orders_customer_idx
				t.Fatalf("indexes %+v", d.Indexes)
			}
		})
	}
}

// TestDescribeSchemaUnknownTable: an unknown table is invalid_table with the closest name.
func TestDescribeSchemaUnknownTable(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	for _, name := range []string{"ordrs", "custommers"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := b.mustFail(t, ErrInvalidTable, "describe_schema", argsJSON(t, map[string]any{"table": name}))
			if !strings.Contains(e.Suggestion, "Did you mean") || !strings.Contains(e.Suggestion, "Available tables: customers, orders") {
				t.Fatalf("suggestion: %s", e.Suggestion)
			}
			if e.Operation != "describe" {
				t.Fatalf("operation %q", e.Operation)
			}
		})
	}
}
