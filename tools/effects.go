package tools

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgtools/pgtools/tools/internal/wire"
)

// effectsSQL reads what the current transaction has done so far, from PostgreSQL's own
// per-transaction counters (which include open subtransactions, so a session's savepoint is
// seen): rows written to the system catalogs that DDL changes, rows updated or deleted in user
// tables, and whether counting is on at all. Compared before and after an agent's statement, the
// difference is what that statement did, whatever its command tag says: CREATE TABLE AS and SELECT
// INTO report SELECT, and a writable CTE or an INSERT … SELECT wrapping an UPDATE reports the
// outer command's rows only. One pass over pg_class gives both sums: the user-table sum is what
// pg_stat_xact_user_tables' n_tup_upd + n_tup_del add up to (tables, matviews and partitioned
// tables outside pg_catalog and information_schema; TOAST tables are relkind t), without that
// view's join and aggregation, which made a reading cost several times a plain statement.
const effectsSQL = `SELECT coalesce(sum(pg_catalog.pg_stat_get_xact_tuples_inserted(c.oid) + pg_catalog.pg_stat_get_xact_tuples_updated(c.oid) + pg_catalog.pg_stat_get_xact_tuples_deleted(c.oid))
    FILTER (WHERE c.oid = ANY ('{pg_catalog.pg_class,pg_catalog.pg_attribute,pg_catalog.pg_type,pg_catalog.pg_proc,pg_catalog.pg_namespace,pg_catalog.pg_constraint,pg_catalog.pg_index,pg_catalog.pg_trigger,pg_catalog.pg_rewrite,pg_catalog.pg_policy,pg_catalog.pg_extension,pg_catalog.pg_description,pg_catalog.pg_attrdef,pg_catalog.pg_sequence,pg_catalog.pg_depend,pg_catalog.pg_authid,pg_catalog.pg_auth_members,pg_catalog.pg_database,pg_catalog.pg_shdepend,pg_catalog.pg_default_acl,pg_catalog.pg_event_trigger,pg_catalog.pg_publication,pg_catalog.pg_subscription}'::pg_catalog.regclass[])), 0),
 coalesce(sum(pg_catalog.pg_stat_get_xact_tuples_updated(c.oid) + pg_catalog.pg_stat_get_xact_tuples_deleted(c.oid))
    FILTER (WHERE c.relkind IN ('r', 'm', 'p') AND c.relnamespace <> 'pg_catalog'::pg_catalog.regnamespace
      AND c.relnamespace IS DISTINCT FROM pg_catalog.to_regnamespace('information_schema')), 0),
 current_setting('track_counts')::bool,
 current_user::text, coalesce(current_setting('request.jwt.claims', true), '')
 FROM pg_catalog.pg_class c`

// effects is one reading of effectsSQL.
type effects struct {
	catalog int64  // catalog rows written
	changed int64  // user-table rows updated or deleted
	user    string // the role the transaction runs as
	claims  string // request.jwt.claims
}

// sub is what happened between an earlier reading and this one.
func (e effects) sub(before effects) effects {
	return effects{catalog: e.catalog - before.catalog, changed: e.changed - before.changed}
}

// sameIdentity reports whether the transaction still acts as it did at the earlier reading.
func (e effects) sameIdentity(before effects) bool {
	return e.user == before.user && e.claims == before.claims
}

// execReading runs pgtools' own fixed SQL whose last statement is effectsSQL, through the simple
// protocol (one round trip for BEGIN, SAVEPOINT or SET LOCAL and the reading), and returns the
// reading.
func execReading(ctx context.Context, pc *pgconn.PgConn, sql string) (effects, error) {
	results, err := pc.Exec(ctx, sql).ReadAll()
	if err != nil {
		return effects{}, err
	}
	if len(results) == 0 {
		return effects{}, fmt.Errorf("reading the transaction's effects: no result")
	}
	return effectsOf(results[len(results)-1].Rows)
}

// effectsOf decodes the rows effectsSQL returned.
func effectsOf(rows [][][]byte) (effects, error) {
	if len(rows) != 1 || len(rows[0]) != 5 {
		return effects{}, fmt.Errorf("reading the transaction's effects: no row")
	}
	row := rows[0]
	if string(row[2]) != "t" {
		return effects{}, &Error{Type: ErrInternal, Message: "The database has track_counts off, so pgtools cannot tell what a statement changed; the statement was not run",
			Suggestion: "The operator must turn track_counts on (its default) for pgtools to run agent-written writes."}
	}
	e := effects{user: string(row[3]), claims: string(row[4])}
	var err error
	if e.catalog, err = strconv.ParseInt(string(row[0]), 10, 64); err == nil {
		e.changed, err = strconv.ParseInt(string(row[1]), 10, 64)
	}
	if err != nil {
		return effects{}, fmt.Errorf("reading the transaction's effects: %w", err)
	}
	return e, nil
}

// writeOutcome is what a write did.
type writeOutcome struct {
	rows     *wire.RowSet
	tag      string
	affected int64
	after    effects // a free statement's effects reading after it, identity checked
	ddl      bool    // a free statement changed the schema (judged allowed)
	// sequences names the sequences the statement drew from, read before a rollback: the one
	// thing of it the rollback does not undo (sequenceNote).
	sequences []string
}

// sequencesSQL lists the sequences the open transaction used: nextval, setval and currval lock
// a sequence in RowExclusiveLock until the transaction ends (nothing else does), so the locks
// name exactly the sequences a rolled-back statement may have moved, however it reached them
// (a serial or identity column, a default, a trigger, a function). A sequence the caller's role
// holds no privilege on is named "" (an unnamed sequence).
const sequencesSQL = `SELECT CASE WHEN has_sequence_privilege(c.oid, 'USAGE, SELECT, UPDATE') THEN c.oid::regclass::text ELSE '' END
FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_class c ON c.oid = l.relation
WHERE l.pid = pg_backend_pid() AND l.locktype = 'relation' AND l.mode = 'RowExclusiveLock' AND c.relkind = 'S'
ORDER BY 1 LIMIT 11`

// sequencesUsed returns the sequences the open transaction on pc used (sequencesSQL), or nil
// when it used none or they cannot be read (a failed transaction: then nothing ran to say so).
func sequencesUsed(ctx context.Context, pc *pgconn.PgConn) []string {
	if pc.TxStatus() != 'T' {
		return nil
	}
	res := pc.ExecParams(ctx, sequencesSQL, nil, nil, nil, nil).Read()
	if res.Err != nil {
		return nil
	}
	names := make([]string, 0, len(res.Rows))
	for _, r := range res.Rows {
		names = append(names, string(r[0]))
	}
	return names
}

// sequenceNote is what a rolled-back answer adds when the statement used sequences: a
// rollback does not give back the values nextval handed out. "" for none.
func sequenceNote(seqs []string) string {
	if len(seqs) == 0 {
		return ""
	}
	var named []string
	hidden := 0
	for _, s := range seqs {
		if s == "" {
			hidden++
		} else {
			named = append(named, s)
		}
	}
	if hidden > 0 {
		named = append(named, fmt.Sprintf("%d sequence(s) the caller cannot read", hidden))
	}
	what := strings.Join(named, ", ")
	if len(seqs) > 10 {
		what += " and more"
	}
	return "Sequences are not rolled back: the statement used " + what + ", which may have advanced (values nextval handed out are not given back)."
}

// noteSequences adds sequenceNote(seqs) to err's message when err is an answer (*Error).
func noteSequences(err error, seqs []string) {
	var e *Error
	if note := sequenceNote(seqs); note != "" && errors.As(err, &e) {
		e.Message = strings.TrimSuffix(e.Message, ".") + ". " + note
	}
}

// isDestructive reports statements that need confirm_destructive.
func isDestructive(tag string) bool {
	return strings.HasPrefix(tag, "DROP") || tag == "TRUNCATE TABLE" || tag == "TRUNCATE"
}
