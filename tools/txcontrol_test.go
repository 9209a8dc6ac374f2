package tools

import "testing"

func TestTransactionControl(t *testing.T) {
	t.Parallel()
	refused := []string{"COMMIT", "commit;", "  begin", "BEGIN ISOLATION LEVEL SERIALIZABLE", "start transaction", "END",
		"/* x */ rollback", "-- note\nROLLBACK", "/* a /* nested */ b */ abort", "savepoint a", "release savepoint a",
		"release a", "PREPARE TRANSACTION 'x'", "COMMIT PREPARED 'x'", "ROLLBACK PREPARED 'x'", "SET TRANSACTION READ WRITE",
		"set transaction isolation level serializable", "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE",
		"SET transaction_read_only = off", "set local transaction_isolation = 'serializable'",
		"SET default_transaction_read_only = off", "RESET transaction_isolation", "\t\nCoMmIt"}
	allowed := []string{"select 1", "update t set a = 1", "insert into commits values (1)", "SET search_path = x",
		"set local statement_timeout = 10", "PREPARE p AS SELECT 1", "WITH begin AS (select 1) select * from begin",
		"/* commit */ select 1", "-- rollback\nselect 1", "(select 1)", "", "   ", "select 'commit'", "commit_log_cleanup()"}
	for _, s := range refused {
		if !transactionControl(s) {
			t.Errorf("not refused: %q", s)
		}
	}
	for _, s := range allowed {
		if transactionControl(s) {
			t.Errorf("refused: %q", s)
		}
	}
}
