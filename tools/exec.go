package tools

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgtools/pgtools/tools/internal/wire"
)

// release returns conn to the pool, or destroys it when its session state cannot be trusted.
func release(conn *pgxpool.Conn, destroy bool) {
	if destroy {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Conn().Close(ctx)
		cancel()
	}
	conn.Release()
}

// runRead runs one agent statement in a READ ONLY transaction on a pooled connection. BEGIN, the
// statement and the ROLLBACK travel in one round trip; the statement goes through the extended
// protocol, so PostgreSQL rejects more than one statement, and its portal is executed with a row
// limit, so PostgreSQL stops producing rows at maxRows.
func (db *Database) runRead(ctx context.Context, st wire.Stmt) (*wire.RowSet, error) {
	conn, err := db.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer phase(ctx, "statement", time.Now())
	ctx, cancel := withCallDeadline(ctx, &db.Policy)
	defer cancel()
	pc := conn.Conn().PgConn()
	st.Unnamed = !db.Policy.PreparesStatements()
	rs, destroy, err := wire.Read(ctx, pc, st, wire.StatelessRead)
	release(conn, destroy || pc.IsClosed())
	return rs, err
}
