package tools

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/pgtools/pgtools/tools/catalog"
)

// A session runs on a new backend (spare connections, session.Manager), and a new backend's
// first statement on a table builds that table's catalog entries as it goes: the relation, its
// indexes, columns, defaults, constraints and policies. Measured here, that made the first
// insert_data of a session several times the cost of the same call on a pooled connection.
// Spares are warmed off the critical path (session.Target.Warm), so pgtools tells them which
// tables sessions have been using: each database keeps the few most recent (table, operation)
// pairs its sessions' tool-built statements ran, and a new spare plans each of them with
// EXPLAIN, as the role that ran it, in a READ ONLY transaction that is rolled back. Plain
// EXPLAIN executes nothing (and skips the READ ONLY check of writes, which it never performs),
// so the spare keeps no trace of it but warm caches; a plan that fails (a dropped table, a
// revoked privilege) only skips the rest of the warming. Only tool-built statements are
// recorded, by their table and kind, never an agent's SQL text: the warming must not carry one
// caller's statement to the backend another caller's session will get.

// warmCheckSQL is sqlCheckRole with literals: the identity check after every statement in a
// session is an extended-protocol statement whose first parse looks up its casts, operators and
// functions.
const warmCheckSQL = "SELECT current_user OPERATOR(pg_catalog.=) 'pgtools'::pg_catalog.name AND pg_catalog.current_setting('request.jwt.claims', true) OPERATOR(pg_catalog.=) ''::pg_catalog.text"

// warmBase is the part of every spare's warm-up that does not depend on the tables: the effects
// reading every write in a session runs, and the identity check every statement ends with.
const warmBase = effectsSQL + "; " + warmCheckSQL

// sessionWarmTables is how many recent (table, operation) pairs a database's spares warm.
const sessionWarmTables = 4

// sessionWarm is a database's recent session tables and the warm-up they make.
type sessionWarm struct {
	mu     sync.Mutex
	recent []warmEntry              // most recent first
	parts  atomic.Pointer[[]string] // the warm-up with recent, for sessionTarget (nil: none yet)
}

type warmEntry struct {
	key string // operation and relation
	sql string // its warm-up: the identity, then the EXPLAIN
}

// warmPlan is the EXPLAIN that warms rel for op: a statement of the same kind on the same
// table, which makes the planner and the executor's start open what the real one will.
func warmPlan(op string, rel *catalog.Relation) string {
	q := pgx.Identifier{rel.Schema, rel.Name}.Sanitize()
	switch op {
	case "insert":
		// The sequences behind its serial and identity columns are opened too: nextval runs
		// only when the insert does, and a plan does not open them.
		return "EXPLAIN INSERT INTO " + q + " DEFAULT VALUES; " +
			"SELECT pg_catalog.pg_sequence_last_value(s.oid) FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_class s ON s.oid = d.objid AND s.relkind = 'S' " +
			"WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.refobjid = " +
			quoteLiteral(q) + "::pg_catalog.regclass AND d.deptype IN ('a', 'i')"
	case "update":
		if len(rel.Columns) == 0 {
			return ""
		}
		c := pgx.Identifier{rel.Columns[0]}.Sanitize()
		return "EXPLAIN UPDATE " + q + " SET " + c + " = " + c
	case "delete":
		return "EXPLAIN DELETE FROM " + q
	case "select":
		return "EXPLAIN SELECT * FROM " + q
	}
	return "" // anything else is not warmed
}

// used records that a session of who ran op on rel.
func (w *sessionWarm) used(op string, rel *catalog.Relation, who identity) {
	plan := warmPlan(op, rel)
	if plan == "" || rel == nil {
		return
	}
	key := op + "\x00" + catalog.RelKey(rel.Schema, rel.Name)
	// Planning as the role the statement ran as: the executor's start checks its privileges,
	// and row-level security is planned per role. The claims are an empty set, not the
	// caller's: a policy may read them while planning (a stable function can be evaluated
	// then), and the warming keeps nothing of a caller but the table and the role.
	sql := "SET LOCAL ROLE NONE; SELECT pg_catalog.set_config('request.jwt.claims', '{}', true); "
	if who.role != "" {
		sql += "SET LOCAL ROLE " + pgx.Identifier{who.role}.Sanitize() + "; "
	}
	sql += plan
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.recent) > 0 && w.recent[0].key == key && w.recent[0].sql == sql {
		return // the common case: the same call again
	}
	for i, e := range w.recent {
		if e.key == key {
			w.recent = append(w.recent[:i], w.recent[i+1:]...)
			break
		}
	}
	w.recent = append([]warmEntry{{key: key, sql: sql}}, w.recent...)
	if len(w.recent) > sessionWarmTables {
		w.recent = w.recent[:sessionWarmTables]
	}
	parts := make([]string, len(w.recent))
	for i, e := range w.recent {
		parts[i] = e.sql
	}
	all := []string{warmBase, strings.Join(parts, "; ")}
	w.parts.Store(&all)
}

// warmUp is what a spare connection runs before a begin takes it (session.Target.Warm): warmBase,
// then a plan of each table recent sessions used, once there are any. Callers only read it.
func (w *sessionWarm) warmUp() []string {
	if p := w.parts.Load(); p != nil {
		return *p
	}
	return []string{warmBase}
}
