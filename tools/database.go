package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgtools/pgtools/tools/approval"
	"github.com/pgtools/pgtools/tools/catalog"
	"github.com/pgtools/pgtools/tools/discovery"
	"github.com/pgtools/pgtools/tools/internal/pgerr"
	"github.com/pgtools/pgtools/tools/internal/wire"
)

// Policy is what the operator allows on one database. The zero value of a field means its
// default. Its JSON is a database's "policy" object of the config file, whose durations are
// whole milliseconds (statement_timeout_ms, …).
type Policy struct {
	// ReadOnly refuses every write tool on this database (default false).
	ReadOnly bool `json:"read_only"`
	// AllowDDL lets execute_sql write run DDL for tokens with the ddl scope (default false).
	AllowDDL bool `json:"allow_ddl"`
	// AllowedSchemas limits the schemas whose tables are visible (default: all but system schemas).
	AllowedSchemas []string `json:"allowed_schemas"`
	// AllowTables, when set, is the only tables visible, as "schema.name" or "name" (any schema).
	AllowTables []string `json:"allow_tables"`
	// DenyTables hides tables, as "schema.name" or "name" (any schema); it wins over AllowTables.
	DenyTables []string `json:"deny_tables"`
	// TableLists says what AllowTables and DenyTables are: TableListsEnforced (the default)
	// makes them grants, checked at start against the privileges of every role a caller can act
	// as (runner/preflight); TableListsAdvisory keeps them checks of the table argument only.
	TableLists string `json:"table_lists"`
	// DefaultLimit is the row limit of a read when the caller gives none (default 1000 rows).
	DefaultLimit int `json:"default_limit"`
	// MaxLimit is the hard row limit a caller may ask for (default 10000 rows).
	MaxLimit int `json:"max_limit"`
	// MaxResponseBytes cuts a result's rows at this JSON size (default 4 MiB).
	MaxResponseBytes int `json:"max_response_bytes"`
	// StatementTimeout bounds each statement on the server (default 30 s).
	StatementTimeout time.Duration `json:"-"`
	// LockTimeout bounds each lock wait on the server (default 5 s).
	LockTimeout time.Duration `json:"-"`
	// TransactionTimeout bounds a whole pg_transaction call, all its operations together, and
	// each call inside a pg_tx session (default twice StatementTimeout). Past it the call's work
	// is rolled back and its locks are released: statement timeouts alone let a batch of many
	// statements hold a lock for minutes.
	TransactionTimeout time.Duration `json:"-"`
	// PoolWait bounds the wait for a free connection (default 5 s).
	PoolWait time.Duration `json:"-"`
	// MaxAffectedRows is the default cap on rows one update or delete may change (default 1000).
	MaxAffectedRows int `json:"max_affected_rows"`
	// MaxEstimatedCost refuses, before it runs, a statement whose plan's total cost estimate is
	// above it (too_expensive), at the price of one EXPLAIN round trip per statement (default 0:
	// no bound, no EXPLAIN).
	MaxEstimatedCost float64 `json:"max_estimated_cost"`
	// MaxEstimatedRows refuses, before it runs, a statement the planner estimates to return more
	// rows, or for a write to touch more rows, than this (default 0: no bound).
	MaxEstimatedRows int64 `json:"max_estimated_rows"`
	// RequireApproval lists the writes on this database that a person must approve before they
	// commit (approval.Rule): the call answers approval_required with the effect a rolled-back run
	// measured, and commits when called again with the approved approval_id and the same effect.
	RequireApproval []approval.Rule `json:"require_approval"`
	// ApprovalByClient lets the person using an MCP client that can ask its user (elicitation)
	// approve or deny a request of that client's own calls; the approval is recorded as the
	// client's user's, never the model's (default false: only another credential with the approve
	// scope decides; a client's answer is only as honest as the client).
	ApprovalByClient bool `json:"approval_by_client"`
	// DisabledTools lists wire names of tools refused on this database.
	DisabledTools []string `json:"disabled_tools"`
	// MaskErrorValues replaces the values PostgreSQL echoes in error details (a duplicate key's
	// value, a failing row) with a placeholder (nil: true, the default); MasksErrorValues reads it.
	MaskErrorValues *bool `json:"mask_error_values"`
	// DefaultFormat is the row format of calls that give none: "objects" (default), "columns" or
	// "csv" (docs/design.md §12).
	DefaultFormat string `json:"default_format"`
	// PreparedStatements prepares every read statement once per connection under a name (nil:
	// true, the default). False parses it on each call as PostgreSQL's unnamed statement (pgx's
	// describe-exec mode), still in one round trip: for poolers in transaction mode that cannot
	// track named prepared statements. PreparesStatements reads it.
	PreparedStatements *bool `json:"prepared_statements"`
}

// MasksErrorValues reports whether error details are masked (MaskErrorValues, default true).
func (p Policy) MasksErrorValues() bool { return p.MaskErrorValues == nil || *p.MaskErrorValues }

// PreparesStatements reports whether reads use named prepared statements (PreparedStatements,
// default true).
func (p Policy) PreparesStatements() bool {
	return p.PreparedStatements == nil || *p.PreparedStatements
}

// policyJSON is a Policy as the config file spells it: durations in whole milliseconds.
type policyJSON struct {
	policyFields
	StatementTimeoutMS   int64 `json:"statement_timeout_ms"`
	LockTimeoutMS        int64 `json:"lock_timeout_ms"`
	TransactionTimeoutMS int64 `json:"transaction_timeout_ms"`
	PoolWaitMS           int64 `json:"pool_wait_ms"`
}

type policyFields Policy // Policy's fields without its JSON methods

// UnmarshalJSON reads a policy object of the config file.
func (p *Policy) UnmarshalJSON(b []byte) error {
	var f policyJSON
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*p = Policy(f.policyFields)
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	p.StatementTimeout, p.LockTimeout = ms(f.StatementTimeoutMS), ms(f.LockTimeoutMS)
	p.TransactionTimeout, p.PoolWait = ms(f.TransactionTimeoutMS), ms(f.PoolWaitMS)
	return nil
}

// MarshalJSON writes p as a policy object of the config file.
func (p Policy) MarshalJSON() ([]byte, error) {
	return json.Marshal(policyJSON{policyFields: policyFields(p),
		StatementTimeoutMS: p.StatementTimeout.Milliseconds(), LockTimeoutMS: p.LockTimeout.Milliseconds(),
		TransactionTimeoutMS: p.TransactionTimeout.Milliseconds(), PoolWaitMS: p.PoolWait.Milliseconds()})
}

// withDefaults returns p with every zero field set to its default.
func (p Policy) withDefaults() Policy {
	if p.DefaultLimit <= 0 {
		p.DefaultLimit = 1000
	}
	if p.MaxLimit <= 0 {
		p.MaxLimit = 10000
	}
	if p.DefaultLimit > p.MaxLimit {
		p.DefaultLimit = p.MaxLimit
	}
	if p.MaxResponseBytes <= 0 {
		p.MaxResponseBytes = 4 << 20
	}
	if p.StatementTimeout <= 0 {
		p.StatementTimeout = 30 * time.Second
	}
	if p.LockTimeout <= 0 {
		p.LockTimeout = 5 * time.Second
	}
	if p.TransactionTimeout <= 0 {
		p.TransactionTimeout = 2 * p.StatementTimeout
	}
	if p.PoolWait <= 0 {
		p.PoolWait = 5 * time.Second
	}
	if p.MaxAffectedRows <= 0 {
		p.MaxAffectedRows = 1000
	}
	if p.TableLists == "" {
		p.TableLists = TableListsEnforced
	}
	return p
}

// tableVisible applies the schema and table lists.
func (p *Policy) tableVisible(schema, name string) bool {
	if len(p.AllowedSchemas) > 0 && !slices.Contains(p.AllowedSchemas, schema) {
		return false
	}
	return !p.ListsDeny(schema, name)
}

// ListsDeny reports whether the table lists alone keep schema.name from callers: DenyTables
// names it, or AllowTables is set and does not (AllowedSchemas plays no part). The catalog hides
// such a table, and the start-up check of grants (runner/preflight) refuses a role a caller acts
// as that can reach it.
func (p *Policy) ListsDeny(schema, name string) bool {
	match := func(list []string) bool {
		for _, t := range list {
			if t == schema+"."+name || t == name {
				return true
			}
		}
		return false
	}
	if len(p.AllowTables) > 0 && !match(p.AllowTables) {
		return true
	}
	return match(p.DenyTables)
}

// Database is one configured database: its stateless pool, policy and catalog cache.
// It is safe for concurrent use.
type Database struct {
	// Name is the configured name agents pass as the database argument.
	Name string
	// Pool serves stateless tool calls. Build its config with PoolConfig.
	Pool *pgxpool.Pool
	// Policy is the operator's policy, with defaults applied by NewDatabase.
	Policy Policy

	cat          *catalog.Cache
	disc         discovery.Cache // each role's index of the catalog, for describe_schema's lists
	sessionFrame wire.Frame      // frames a read inside a session, with this policy's timeouts
	sessionWarm  sessionWarm     // the tables recent sessions used, for warming spare connections
}

// NewDatabase wraps a pool built from PoolConfig. The caller keeps ownership of the pool.
func NewDatabase(name string, pool *pgxpool.Pool, policy Policy) *Database {
	db := &Database{Name: name, Pool: pool, Policy: policy.withDefaults()}
	db.cat = catalog.New(db.acquire, db.Policy.tableVisible, 100*time.Millisecond).WithSpare(db.spareConn)
	db.sessionFrame = wire.SessionFrame(db.Policy.sessionCall().StatementTimeout, db.Policy.LockTimeout)
	return db
}

// errNoSpare answers spareConn when the pool has no connection to spare.
var errNoSpare = errors.New("no connection to spare")

// spareConn is a second connection for loading the catalog, if the pool can give one at once: a
// free one, or a new one while the pool is below its size (its connect bounded to a second).
func (db *Database) spareConn(ctx context.Context) (*pgxpool.Conn, error) {
	if st := db.Pool.Stat(); st.AcquiredConns()+st.ConstructingConns() >= st.MaxConns() {
		return nil, errNoSpare
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return db.Pool.Acquire(ctx)
}

// PoolConfig parses dsn into a pool configuration with the settings every stateless connection
// needs: the policy's statement and lock timeouts as session defaults (so a call needs no SET),
// server-side cancellation on context cancel, and an exec mode that creates no prepared
// statements. maxConns of 0 keeps pgxpool's default.
func PoolConfig(dsn string, policy Policy, maxConns int32) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors can quote the DSN, password included: never pass them on.
		return nil, fmt.Errorf("the database URL is not a valid PostgreSQL connection string (postgres://user:password@host:port/dbname?sslmode=…)")
	}
	policy = policy.withDefaults()
	rp := cfg.ConnConfig.RuntimeParams
	rp["statement_timeout"] = strconv.FormatInt(policy.StatementTimeout.Milliseconds(), 10)
	rp["lock_timeout"] = strconv.FormatInt(policy.LockTimeout.Milliseconds(), 10)
	rp["idle_in_transaction_session_timeout"] = strconv.FormatInt((policy.StatementTimeout + time.Minute).Milliseconds(), 10)
	if _, ok := rp["application_name"]; !ok {
		rp["application_name"] = "pgtools"
	}
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	cfg.ConnConfig.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, CancelRequestDelay: 0, DeadlineDelay: 3 * time.Second}
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	return cfg, nil
}

// Ping checks that the database answers.
func (db *Database) Ping(ctx context.Context) error {
	return db.Pool.Ping(ctx)
}

// WithDefaults returns p with every unset field at its default, as NewDatabase applies it; for
// showing the effective policy (pgtools check-config).
func (p Policy) WithDefaults() Policy { return p.withDefaults() }

// acquire takes a connection from the stateless pool, waiting at most poolWait.
func (db *Database) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	wait := db.Policy.PoolWait
	if wait <= 0 {
		wait = 5 * time.Second
	}
	actx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	defer phase(ctx, "pool_wait", time.Now())
	conn, err := db.Pool.Acquire(actx)
	if err != nil {
		if ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
			return nil, pgerr.ErrPoolWait
		}
		return nil, fmt.Errorf("acquiring a connection: %w", err)
	}
	return conn, nil
}

// sessionCall is the policy a call inside a pg_tx session runs under: the database's, with the
// statement timeout cut to the call's bound (Policy.TransactionTimeout) when that is shorter.
func (p *Policy) sessionCall() *Policy {
	q := *p
	q.StatementTimeout = min(p.StatementTimeout, p.TransactionTimeout)
	return &q
}

// The values of Policy.TableLists.
const (
	// TableListsEnforced makes allow_tables and deny_tables grants: pgtools refuses to start
	// while a role a caller can act as may read, write or own a table they keep from callers.
	TableListsEnforced = "enforced"
	// TableListsAdvisory keeps the lists checks of the table argument only; where, execute_sql,
	// pg_transaction and sessions still reach every table the role can.
	TableListsAdvisory = "advisory"
)

// TableListsAreGrants reports whether p's table lists must hold as grants. Anything but
// TableListsAdvisory counts as enforced, so a misspelt value fails closed.
func (p Policy) TableListsAreGrants() bool { return p.TableLists != TableListsAdvisory }

// ClassifyError turns an error from database work on db into the *Error a model reads, values
// masked as db's policy says. (The session manager, which cannot import tools, gets the same
// answer from pgerr.Classify with what session.Target carries.)
func ClassifyError(ctx context.Context, err error, db *Database) *Error {
	return classify(ctx, err, callContext{Database: db.Name}, db.Policy.MasksErrorValues())
}
