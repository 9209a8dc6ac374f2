package tools

import (
	"strings"
	"testing"

	"github.com/pgtools/pgtools/tools/approval"
)

// TestRolledBackAnswersNameSequences: a dry run and an approval's measuring run roll their
// change back, but not the sequences it drew from. An update dry run whose trigger draws a
// revision number, and the measuring run of an insert into a table with a serial column, move
// their sequences (nextval shows it), and each answer says so, naming the sequence; a dry run
// that draws from no sequence does not claim one moved.
func TestRolledBackAnswersNameSequences(t *testing.T) {
	t.Parallel()
	f := newApprovalFixture(t, approval.Rule{When: approval.WhenRowsOver, Rows: 2})
	role := quoteIdent(f.b.db.RoleName("agent"))
	f.b.db.Exec(t, `CREATE TABLE tickets (id serial PRIMARY KEY, title text, rev bigint);
		CREATE SEQUENCE tickets_rev_seq;
		CREATE FUNCTION tickets_rev() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN NEW.rev := nextval('tickets_rev_seq'); RETURN NEW; END$$;
		CREATE TRIGGER tickets_rev BEFORE UPDATE ON tickets FOR EACH ROW EXECUTE FUNCTION tickets_rev();
		INSERT INTO tickets (title) SELECT 'old ' || i FROM generate_series(1, 3) i;
		CREATE TABLE plain (k text PRIMARY KEY, v text); INSERT INTO plain VALUES ('a', 'x');
		GRANT INSERT, UPDATE, SELECT ON tickets, plain TO `+role+`; GRANT USAGE, SELECT ON SEQUENCE tickets_id_seq, tickets_rev_seq TO `+role)
	next := func(seq string) int64 { return f.b.db.QueryInt(t, `SELECT nextval('`+seq+`')`) }
	rev := next("tickets_rev_seq")
	out, e := f.b.call(t, "update_data", `{"table":"tickets","set":{"title":"new"},"where":"true","dry_run":true}`)
	if e != nil {
		t.Fatal(e)
	}
	if n := f.b.db.QueryInt(t, `SELECT count(*) FROM tickets WHERE title = 'new'`); n != 0 {
		t.Fatalf("the dry run kept %d rows", n)
	}
	if moved := next("tickets_rev_seq"); moved != rev+4 {
		t.Fatalf("nextval after the dry run: %d, want %d (the rolled-back update drew 3 values)", moved, rev+4)
	}
	hint, _ := out["hint"].(string)
	if !strings.Contains(hint, "tickets_rev_seq") || !strings.Contains(hint, "not rolled back") {
		t.Errorf("the dry run's answer does not say the sequence moved: %v", out)
	}

	start := next("tickets_id_seq")
	rows := `[{"title":"a"},{"title":"b"},{"title":"c"}]`

	_, e = f.b.call(t, "insert_data", `{"table":"tickets","rows":`+rows+`,"autocommit":true}`)
	if e == nil || e.Type != ErrApprovalRequired {
		t.Fatalf("the 3-row insert: %v, want approval_required", e)
	}
	if moved := next("tickets_id_seq"); moved != start+4 {
		t.Fatalf("nextval after the measuring run: %d, want %d", moved, start+4)
	}
	if !strings.Contains(e.Message, "tickets_id_seq") || !strings.Contains(e.Message, "not rolled back") {
		t.Errorf("the measuring run's answer does not say the sequence moved: %s", e.Message)
	}

	// A pg_transaction measured for approval and rolled back says so too.
	start = next("tickets_id_seq")
	batch := `{"operations":[{"sql":"INSERT INTO tickets (title) VALUES ('x'), ('y'), ('z')"}]}`
	_, e = f.b.call(t, "pg_transaction", batch)
	if e == nil || e.Type != ErrApprovalRequired {
		t.Fatalf("the 3-row batch: %v, want approval_required", e)
	}
	if moved := next("tickets_id_seq"); moved != start+4 {
		t.Fatalf("nextval after the batch's measuring run: %d, want %d", moved, start+4)
	}
	if !strings.Contains(e.Message, "tickets_id_seq") || !strings.Contains(e.Message, "not rolled back") {
		t.Errorf("the batch's measuring run does not say the sequence moved: %s", e.Message)
	}

	out, e = f.b.call(t, "update_data", `{"table":"plain","set":{"v":"y"},"where":"true","dry_run":true}`)
	if e != nil {
		t.Fatal(e)
	}
	if hint, _ := out["hint"].(string); strings.Contains(hint, "sequence") {
		t.Errorf("a dry run that drew from no sequence claims one moved: %s", hint)
	}
}
