package wire

import (
	"errors"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// ErrRetry reports that a cached plan went stale: Read runs the statement once more.
var ErrRetry = errors.New("cached plan changed result type; retry")

// stmtCacheSize bounds the prepared statements pgtools keeps per connection.
const stmtCacheSize = 128

// StmtNamePrefix starts the name of every statement the cache prepares.
const StmtNamePrefix = "pgt_"

// stmtCache is a connection's cache of named prepared statements, so a repeated statement is
// parsed and planned once per connection rather than on every call (as pgx's own statement cache
// does). The names are pgtools' own ("pgt_N"), never reused, and invisible to agents: an agent
// statement that deallocates them is not a safe command tag, so its connection is destroyed.
// It belongs to one connection and is used only by the goroutine holding it.
type stmtCache struct {
	names   map[string]*cachedStmt
	seq     uint64
	tick    uint64
	added   []string // statements parsed in the pipeline being sent, by SQL
	closing []string // statement names to close in the next pipeline

	// unnamed bypasses the cache: every statement is parsed as the unnamed statement, which
	// PostgreSQL replaces at the next Parse (Policy.DescribeExec). scratch carries the row
	// encoder between such calls.
	unnamed bool
	scratch cachedStmt
}

type cachedStmt struct {
	name    string
	lastUse uint64
	enc     RowEncoder // built from the statement's first RowDescription, reused while cached
}

const stmtCacheKey = "pgtools.stmtcache"

// stmtCacheOf returns pc's cache, creating it on first use.
func stmtCacheOf(pc *pgconn.PgConn) *stmtCache {
	data := pc.CustomData()
	if c, ok := data[stmtCacheKey].(*stmtCache); ok {
		return c
	}
	c := &stmtCache{names: map[string]*cachedStmt{}}
	data[stmtCacheKey] = c
	return c
}

// sendExec queues Parse (when sql is not cached yet), Bind, an optional Describe of the portal,
// and Execute with a row limit (0 = all). It returns the cache entry and whether the statement
// was already cached.
func (c *stmtCache) sendExec(fe *pgproto3.Frontend, sql string, params [][]byte, describe bool, maxRows int) (*cachedStmt, bool) {
	st, hit := c.sendBindParams(fe, sql, params)
	if describe {
		fe.SendDescribe(&pgproto3.Describe{ObjectType: 'P'})
	}
	fe.SendExecute(&pgproto3.Execute{MaxRows: uint32(maxRows)})
	return st, hit
}

// sendBind queues Parse (when sql is not cached yet) and Bind of the unnamed portal, without
// executing it.
func (c *stmtCache) sendBind(fe *pgproto3.Frontend, sql string) { c.sendBindParams(fe, sql, nil) }

func (c *stmtCache) sendBindParams(fe *pgproto3.Frontend, sql string, params [][]byte) (*cachedStmt, bool) {
	if c.unnamed {
		fe.SendParse(&pgproto3.Parse{Query: sql})
		fe.SendBind(&pgproto3.Bind{Parameters: params})
		return &c.scratch, false
	}
	c.tick++
	st, hit := c.names[sql]
	if !hit {
		if len(c.names) >= stmtCacheSize {
			c.evictOldest()
		}
		c.seq++
		st = &cachedStmt{name: StmtNamePrefix + strconv.FormatUint(c.seq, 36)}
		c.names[sql] = st
		c.added = append(c.added, sql)
		fe.SendParse(&pgproto3.Parse{Name: st.name, Query: sql})
	}
	st.lastUse = c.tick
	fe.SendBind(&pgproto3.Bind{PreparedStatement: st.name, Parameters: params})
	return st, hit
}

// sendCloses queues Close for statements evicted earlier. Closing a statement that does not exist
// is not an error in PostgreSQL.
func (c *stmtCache) sendCloses(fe *pgproto3.Frontend) {
	for _, name := range c.closing {
		fe.SendClose(&pgproto3.Close{ObjectType: 'S', Name: name})
	}
	c.closing = c.closing[:0]
}

// settle ends a pipeline. When it failed, the statements it parsed may or may not exist (a
// failed Parse skips the rest of its group): forget them and close them next time.
func (c *stmtCache) settle(failed bool) {
	if failed {
		for _, sql := range c.added {
			c.evict(sql)
		}
	}
	c.added = c.added[:0]
}

func (c *stmtCache) evict(sql string) {
	if st, ok := c.names[sql]; ok {
		delete(c.names, sql)
		c.closing = append(c.closing, st.name)
	}
}

func (c *stmtCache) evictOldest() {
	var oldest string
	var min uint64
	first := true
	for sql, st := range c.names {
		if first || st.lastUse < min {
			oldest, min, first = sql, st.lastUse, false
		}
	}
	c.evict(oldest)
}

// isPlanChange reports PostgreSQL's "cached plan must not change result type", raised when a
// prepared statement's table changed shape since it was prepared.
func isPlanChange(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "0A000" && pgErr.Routine == "RevalidateCachedQuery"
}
