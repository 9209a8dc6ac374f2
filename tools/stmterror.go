package tools

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgtools/pgtools/tools/catalog"
	"github.com/pgtools/pgtools/tools/words"
)

// stmtInfo is what a call knows about the statement it ran, beyond PostgreSQL's error: enough
// to turn a generic suggestion into the one that makes the next call work.
type stmtInfo struct {
	sql       string            // the statement as sent (PostgreSQL's error positions point into it)
	rel       *catalog.Relation // the table the call named, if any
	paramCols []string          // the column each $n binds (insert and set values); "" for where params
	paramArgs bool              // paramCols name arguments, not columns (operator-defined tools)
	readOnly  bool              // the statement ran in a READ ONLY transaction
}

// statementError classifies an error of a statement run for req, then fills in what only this
// call knows: the columns of the table when where names one that does not exist (and the
// quoting slip behind `status = "paid"`), the column and $n a value did not fit, the rule of a
// violated CHECK constraint, and the next step inside a read-only session.
func (req *request) statementError(ctx context.Context, err error, info stmtInfo) *Error {
	e := classify(ctx, err, callContext{ReadOnly: info.readOnly, Database: req.db.Name}, req.db.Policy.MasksErrorValues())
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || ctx.Err() != nil {
		return e
	}
	switch {
	case pe.Code == "42703":
		name, quoted := identAt(info.sql, int(pe.Position))
		if quoted && name != "" {
			e.Suggestion = fmt.Sprintf(`Double quotes name a column in SQL. To compare with the text %s, write it in single quotes ('%s') or pass it in params and write $1. `,
				words.Quote(name), strings.ReplaceAll(name, "'", "''"))
			if info.rel != nil {
				e.Suggestion += catalog.ColumnSuggestion(info.rel, name, "")
			}
		} else if info.rel != nil && name != "" {
			e.Suggestion = catalog.ColumnSuggestion(info.rel, name, "") + " (columns of " + info.rel.Display() + ")"
		}
	case pe.Code[:2] == "22":
		if n := paramNumber(pe.Where); n > 0 {
			if n <= len(info.paramCols) && info.paramCols[n-1] != "" && info.paramArgs {
				arg := info.paramCols[n-1]
				e.Message += fmt.Sprintf(" (argument %s, $%d)", words.Quote(arg), n)
				e.Suggestion = fmt.Sprintf("Send argument %s in the type the tool's schema gives it.", words.Quote(arg))
			} else if n <= len(info.paramCols) && info.paramCols[n-1] != "" {
				col := info.paramCols[n-1]
				e.Message += fmt.Sprintf(" (the value for column %s, $%d)", words.Quote(col), n)
				e.Suggestion = fmt.Sprintf("Send a value of column %s's type (describe_schema shows it): numbers as numbers, timestamps as ISO 8601 strings, JSON as objects.", words.Quote(col))
			} else {
				e.Message += fmt.Sprintf(" (params value $%d)", n)
				e.Suggestion = fmt.Sprintf("The value bound to $%d does not fit where it is used: send it in the type the expression expects, or add a cast such as $%d::text.", n, n)
			}
		}
	case pe.Code[:2] == "23" && req.who().role != "" && req.hiddenFrom(ctx, pe, req.who().role):
		// PostgreSQL names the column or constraint even to a role that holds no privilege on
		// it, and a constraint's generated name spells its columns: say what broke without them.
		e.Message = "The row breaks a constraint over columns or tables this role may not use"
		if pe.Code == "23502" {
			e.Message = "Null value in a column this role may not use violates its not-null constraint"
		}
		e.Suggestion = "A rule on data your role cannot see refused the values you sent; change them, or ask the operator which values the table accepts from your role."
	case pe.Code == "23514" && pe.ConstraintName != "":
		if rule := req.checkRule(ctx, pe); rule != "" {
			e.Suggestion = fmt.Sprintf("The row must satisfy %s of constraint %s; change the value so it does.", rule, pe.ConstraintName)
		}
	case pe.Code == "25006" && req.session != nil && req.session.Opts.ReadOnly:
		e.Suggestion = fmt.Sprintf(`Session %s is read-only. To change data, end it (pg_tx {"action":"rollback","session_id":"%s"}), begin a read-write session (pg_tx {"action":"begin"}) and repeat the write with its session_id.`, req.session.ID, req.session.ID)
	}
	return e
}

// identAt returns the identifier that starts at PostgreSQL's 1-based character position pos in
// sql, and whether it is double-quoted; "" when pos is outside sql.
func identAt(sql string, pos int) (string, bool) {
	if pos <= 0 {
		return "", false
	}
	i := 0
	for n := 1; n < pos && i < len(sql); n++ {
		_, size := utf8.DecodeRuneInString(sql[i:])
		i += size
	}
	if i >= len(sql) {
		return "", false
	}
	if sql[i] == '"' {
		end := strings.IndexByte(sql[i+1:], '"')
		if end < 0 {
			return "", false
		}
		return sql[i+1 : i+1+end], true
	}
	j := i
	for j < len(sql) && (sql[j] == '_' || sql[j] == '$' || sql[j] >= 'a' && sql[j] <= 'z' || sql[j] >= 'A' && sql[j] <= 'Z' || sql[j] >= '0' && sql[j] <= '9' || sql[j] >= 0x80) {
		j++
	}
	return words.ASCIILower(sql[i:j]), false
}

// paramNumber reads n from PostgreSQL's context line "unnamed portal parameter $n = '...'" of a
// value that failed to bind; 0 when there is none.
func paramNumber(where string) int {
	i := strings.Index(where, "parameter $")
	if i < 0 {
		return 0
	}
	s := where[i+len("parameter $"):]
	j := 0
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	n, _ := strconv.Atoi(s[:j])
	return n
}

// hiddenFrom reports whether the constraint pe names, or else the column it names, involves a
// column or table role may not use (as information_schema decides: no privilege on the column and
// not the owner). When the catalog cannot tell, it reports true, and the answer names nothing; an
// error that names no table (a domain's constraint) is left as PostgreSQL gave it.
func (req *request) hiddenFrom(ctx context.Context, pe *pgconn.PgError, role string) bool {
	const usable = `(pg_has_role($4, %[1]s.relowner, 'USAGE') OR NOT EXISTS (SELECT 1 FROM unnest(%[2]s) k
		WHERE NOT has_column_privilege($4, %[1]s.oid, k, 'SELECT,INSERT,UPDATE,REFERENCES')))`
	if pe.TableName == "" {
		return false // a domain's constraint: no table's column is involved
	}
	var q, name string
	if pe.ConstraintName != "" {
		q, name = `SELECT NOT (`+fmt.Sprintf(usable, "r", "c.conkey")+` AND (f.oid IS NULL OR `+fmt.Sprintf(usable, "f", "c.confkey")+`))
		FROM pg_catalog.pg_constraint c JOIN pg_catalog.pg_class r ON r.oid = c.conrelid
		JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace LEFT JOIN pg_catalog.pg_class f ON f.oid = c.confrelid
		WHERE c.conname = $1 AND r.relname = $2 AND ($3 = '' OR n.nspname = $3) LIMIT 1`, pe.ConstraintName
	} else if pe.ColumnName != "" {
		q, name = `SELECT NOT `+fmt.Sprintf(usable, "r", "ARRAY[a.attnum]")+`
		FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class r ON r.oid = a.attrelid
		JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace
		WHERE a.attname = $1 AND NOT a.attisdropped AND r.relname = $2 AND ($3 = '' OR n.nspname = $3) LIMIT 1`, pe.ColumnName
	} else {
		return false // the error names neither
	}
	hidden := true
	if err := req.db.Pool.QueryRow(ctx, q, name, pe.TableName, pe.SchemaName, role).Scan(&hidden); err != nil {
		return true
	}
	return hidden
}

// checkRule is the definition of the CHECK constraint pe names (CHECK ((qty >= 0))), or "".
func (req *request) checkRule(ctx context.Context, pe *pgconn.PgError) string {
	var rule string
	err := req.db.Pool.QueryRow(ctx, `SELECT pg_get_constraintdef(c.oid) FROM pg_catalog.pg_constraint c
		JOIN pg_catalog.pg_class r ON r.oid = c.conrelid JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace
		WHERE c.conname = $1 AND r.relname = $2 AND ($3 = '' OR n.nspname = $3) LIMIT 1`, pe.ConstraintName, pe.TableName, pe.SchemaName).Scan(&rule)
	if err != nil {
		return ""
	}
	return rule
}
