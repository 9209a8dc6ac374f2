package runner

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/session"
)

// Defaults of Config, in one place: Config.withDefaults applies them during Validate, the
// transports read them for their own options, and schemas/config.schema.json states the same
// values as "default"s (TestSchemaDefaultsMatchGo compares the two). Policy fields take
// tools.Policy.WithDefaults; session defaults are the session package's.
const (
	// DefaultListen is Config.Listen when unset.
	DefaultListen = "127.0.0.1:8080"
	// DefaultMaxBodyBytes is Config.MaxBodyBytes when unset: 1 MiB.
	DefaultMaxBodyBytes = 1 << 20
	// DefaultMaxSessions is Config.MaxSessions when unset.
	DefaultMaxSessions = session.DefaultMaxSessions
	// DefaultMaxTransactions is Config.MaxTransactions when unset.
	DefaultMaxTransactions = 10
	// DefaultSessionTTL is Config.SessionTTL when unset.
	DefaultSessionTTL = session.DefaultTTL
	// DefaultShutdownGrace is Config.ShutdownGrace when unset.
	DefaultShutdownGrace = 10 * time.Second
	// DefaultMaxConns is DatabaseConfig.MaxConns when unset.
	DefaultMaxConns = 10
	// DefaultLogLevel is Config.LogLevel when unset.
	DefaultLogLevel = "info"
)

// Config is the runner's whole configuration, from a config file (schemas/config.schema.json),
// environment and flags. Build it with LoadConfigFile and the caller's overrides, then call
// Validate once, which fills the defaults (see withDefaults); the zero value of a field means
// its default.
type Config struct {
	// Listen is the HTTP listen address (default "127.0.0.1:8080"). Without tokens it must be a
	// loopback address.
	Listen string
	// MetricsListen is a separate address serving only /metrics, /healthz and /readyz; "" (the
	// default) serves /metrics on Listen.
	MetricsListen string
	// OpenAPIPublic serves /openapi.json without a token, listing the built-in tools only (never
	// the operator's custom tools); a request with a token still gets its own list. Default
	// false: /openapi.json needs a token like /v1/tools.
	OpenAPIPublic bool
	// Tokens are the accepted API tokens; none (and no JWT) means open access, on loopback only.
	Tokens []Token
	// JWT, when set, also accepts JSON Web Tokens from one issuer as bearer tokens (docs/design.md §11).
	JWT *JWTConfig
	// MCPOAuth, when set, makes /mcp an OAuth 2.1 resource server; it needs JWT.
	MCPOAuth *MCPOAuthConfig
	// MCPStructuredContent adds outputSchema and structuredContent to the MCP tools, on /mcp and
	// pgtools mcp (MCPOptions.StructuredContent; default false: each result once, as text).
	MCPStructuredContent bool
	// Databases are the configured databases by name; tools default to "default".
	Databases map[string]DatabaseConfig
	// MaxBodyBytes caps a request body, in bytes (default 1 MiB).
	MaxBodyBytes int64
	// Limits are the per-token call limits (default: none).
	Limits Limits
	// LogLevel is debug, info (default), warn or error.
	LogLevel string
	// AuditLog is the audit log path, "-" for stderr, "" for none.
	AuditLog string
	// MaxSessions caps open pg_tx sessions (default 10 sessions).
	MaxSessions int
	// MaxSessionsPerPrincipal caps the sessions one principal may hold, read-only ones included
	// (default: see ConnLimits).
	MaxSessionsPerPrincipal int
	// MaxTransactions caps pg_transaction calls running at once, each holding a pooled
	// connection for its batch (default 10).
	MaxTransactions int
	// MaxTransactionsPerPrincipal caps the pg_transaction calls one principal may run at once
	// (default: see ConnLimits).
	MaxTransactionsPerPrincipal int
	// MaxSessionsPerSubject caps the sessions one end user of an act_as token or JWT issuer may
	// hold within the owner's share (default: half of it, at least 1; see ConnLimits).
	MaxSessionsPerSubject int
	// MaxTransactionsPerSubject caps the pg_transaction calls one end user of an act_as token or
	// JWT issuer may run at once within the owner's share (default: half of it, at least 1).
	MaxTransactionsPerSubject int
	// ExtraPrincipals counts the principals besides the API tokens (or the open-access local
	// principal) that share the session and transaction limits: 1 when serve joins n8n brokers.
	// The command sets it; it only changes the per-principal defaults.
	ExtraPrincipals int
	// SessionTTL is a session's idle lifetime (default 30 minutes; the file gives seconds).
	SessionTTL time.Duration
	// DrainDelay is how long, after SIGTERM, /readyz answers 503 while requests are still served
	// (default 0).
	DrainDelay time.Duration
	// ShutdownGrace is how long in-flight calls may run after the listener closes before they are
	// cancelled (default 10 s). Set ShutdownGraceSet to use an explicit 0.
	ShutdownGrace    time.Duration
	ShutdownGraceSet bool
	// ReplicaID names this runner among the replicas of a deployment: every pg_tx session id
	// starts with its tag (session.ReplicaTag), so a replica can say that a session belongs to
	// another one and a proxy can route by prefix. Default: the host name (a Kubernetes pod's
	// name). Up to 63 letters, digits, '.', '_' or '-'.
	ReplicaID string
	// Tracer, when set, traces every tool call and its database round trips with OpenTelemetry
	// (the command builds it from the OTEL_* environment: TracingEnabled, NewTracerProvider);
	// nil, the default, traces nothing.
	Tracer TracerProvider
	// CustomTools are the operator-defined tools (docs/design.md §13), in config order. Validate fills
	// their defaults (database "default", mode "read") and checks their structure; their
	// statements are checked on their databases when the registry is built (tools.Options.CustomTools).
	CustomTools []tools.CustomTool
	// File is the config file the settings came from, "" for none (for messages).
	File string
}

// Limits are per-principal limits on tool calls, over HTTP and MCP alike. Zero means no limit.
type Limits struct {
	// RatePerSecond is the sustained rate of tool calls per token, refilling a token bucket
	// (default 0: unlimited).
	RatePerSecond float64
	// Burst is the bucket size: calls allowed at once above the rate (default: RatePerSecond
	// rounded up, at least 1).
	Burst int
	// MaxConcurrent is the most calls one token may have in flight (default 0: unlimited); the
	// end users of an act_as token and the subjects of a JWT issuer count against their token's
	// or issuer's limit together.
	MaxConcurrent int
	// MaxConcurrentPerSubject is the most calls one end user (an act_as subject or a JWT's sub)
	// may have in flight within its token's or issuer's MaxConcurrent (default: half of it, at
	// least 1; unlimited when MaxConcurrent is).
	MaxConcurrentPerSubject int
}

// DatabaseConfig is one database's connection and policy.
type DatabaseConfig struct {
	// URL is the PostgreSQL connection string. It is a secret: never logged or printed; see
	// DescribeDSN for what may be shown.
	URL string
	// Password, when set, replaces the password in URL (from password_file).
	Password string
	// MaxConns is the stateless pool size, in connections (default 10).
	MaxConns int32
	// Policy is what the operator allows on this database; Validate fills its defaults with
	// tools.Policy.WithDefaults.
	Policy tools.Policy
	// Origin says where URL came from ("config file", "env DATABASE_URL", "--database-url"), for
	// check-config and messages.
	Origin string
}

// fileConfig mirrors config.schema.json.
type fileConfig struct {
	Listen        string `json:"listen"`
	MetricsListen string `json:"metrics_listen"`
	OpenAPIPublic bool   `json:"openapi_public"`
	Tokens        []struct {
		Token            string         `json:"token"`
		TokenFile        string         `json:"token_file"`
		Name             string         `json:"name"`
		Scopes           []string       `json:"scopes"`
		Databases        []string       `json:"databases"`
		MaxResponseBytes int            `json:"max_response_bytes"`
		DefaultFormat    string         `json:"default_format"`
		Tools            []string       `json:"tools"`
		Role             string         `json:"role"`
		ActAs            bool           `json:"act_as"`
		ActAsRole        string         `json:"act_as_role"`
		ActAsClaims      map[string]any `json:"act_as_claims"`
	} `json:"tokens"`
	JWT       *jwtFile      `json:"jwt"`
	MCPOAuth  *mcpOAuthFile `json:"mcp_oauth"`
	MCP       mcpFile       `json:"mcp"`
	Databases map[string]struct {
		URL          string     `json:"url"`
		URLFile      string     `json:"url_file"`
		PasswordFile string     `json:"password_file"`
		MaxConns     int32      `json:"max_conns"`
		Policy       policyFile `json:"policy"`
	} `json:"databases"`
	Limits struct {
		MaxBodyBytes          int64   `json:"max_body_bytes"`
		RatePerSecond         float64 `json:"rate_per_second"`
		Burst                 int     `json:"burst"`
		MaxConcurrentPerToken int     `json:"max_concurrent_per_token"`
		MaxConcurrentPerSub   int     `json:"max_concurrent_per_subject"`
	} `json:"limits"`
	Sessions struct {
		MaxSessions                 int   `json:"max_sessions"`
		MaxSessionsPerPrincipal     int   `json:"max_sessions_per_principal"`
		MaxTransactions             int   `json:"max_transactions"`
		MaxTransactionsPerPrincipal int   `json:"max_transactions_per_principal"`
		MaxSessionsPerSubject       int   `json:"max_sessions_per_subject"`
		MaxTransactionsPerSubject   int   `json:"max_transactions_per_subject"`
		TTLSeconds                  int64 `json:"ttl_seconds"`
	} `json:"sessions"`
	Shutdown struct {
		DrainDelaySeconds float64  `json:"drain_delay_seconds"`
		GraceSeconds      *float64 `json:"grace_seconds"`
	} `json:"shutdown"`
	AuditLog    string           `json:"audit_log"`
	LogLevel    string           `json:"log_level"`
	ReplicaID   string           `json:"replica_id"`
	CustomTools []customToolFile `json:"custom_tools"`
}

// mcpFile is the config file's "mcp" object: see Config.MCPStructuredContent.
type mcpFile struct {
	StructuredContent bool `json:"structured_content"`
}

// ConfigError lists every problem found in a configuration, one per line, each naming where the
// problem is and how to fix it.
type ConfigError struct {
	// Source names what was checked: "config file pgtools.json" or "the configuration".
	Source string
	// Problems are one line each, "path: what is wrong and what to do".
	Problems []string
}

// Error implements error: the source, then one indented line per problem.
func (e *ConfigError) Error() string {
	n := len(e.Problems)
	head := fmt.Sprintf("%s is invalid (%d problems):", e.Source, n)
	if n == 1 {
		head = e.Source + " is invalid:"
	}
	return head + "\n  " + strings.Join(e.Problems, "\n  ")
}

// policyFile is a database's policy as the config file (and the effective config printed by
// check-config) spells it.
type policyFile struct {
	ReadOnly             bool     `json:"read_only"`
	AllowDDL             bool     `json:"allow_ddl"`
	AllowedSchemas       []string `json:"allowed_schemas"`
	AllowTables          []string `json:"allow_tables"`
	DenyTables           []string `json:"deny_tables"`
	TableLists           string   `json:"table_lists"`
	DefaultLimit         int      `json:"default_limit"`
	MaxLimit             int      `json:"max_limit"`
	MaxResponseBytes     int      `json:"max_response_bytes"`
	DefaultFormat        string   `json:"default_format"`
	StatementTimeoutMS   int64    `json:"statement_timeout_ms"`
	LockTimeoutMS        int64    `json:"lock_timeout_ms"`
	TransactionTimeoutMS int64    `json:"transaction_timeout_ms"`
	PoolWaitMS           int64    `json:"pool_wait_ms"`
	MaxAffectedRows      int      `json:"max_affected_rows"`
	DisabledTools        []string `json:"disabled_tools"`
	MaskErrorValues      *bool    `json:"mask_error_values"`
	PreparedStatements   *bool    `json:"prepared_statements"`
}

// LoadConfigFile reads a JSON config file, validates it against the schema and reads the secrets
// its *_file keys name. Every problem is reported, one line per path, naming the fix; the error
// is then a *ConfigError (or an I/O error when the file cannot be read at all).
func LoadConfigFile(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config file: %w", err)
	}
	source := "config file " + path
	if problems := validateConfigDoc(raw); len(problems) > 0 {
		return nil, &ConfigError{Source: source, Problems: problems}
	}
	var fc fileConfig
	if err := json.Unmarshal(raw, &fc); err != nil {
		// The schema accepted the document, so this is a type the struct cannot hold.
		return nil, &ConfigError{Source: source, Problems: []string{err.Error()}}
	}
	cfg := &Config{Listen: fc.Listen, MetricsListen: fc.MetricsListen, OpenAPIPublic: fc.OpenAPIPublic, Databases: map[string]DatabaseConfig{},
		MaxBodyBytes: fc.Limits.MaxBodyBytes, LogLevel: fc.LogLevel, AuditLog: fc.AuditLog,
		Limits: Limits{RatePerSecond: fc.Limits.RatePerSecond, Burst: fc.Limits.Burst, MaxConcurrent: fc.Limits.MaxConcurrentPerToken,
			MaxConcurrentPerSubject: fc.Limits.MaxConcurrentPerSub},
		MaxSessions: fc.Sessions.MaxSessions, SessionTTL: time.Duration(fc.Sessions.TTLSeconds) * time.Second,
		DrainDelay: seconds(fc.Shutdown.DrainDelaySeconds), File: path,
		MaxSessionsPerPrincipal: fc.Sessions.MaxSessionsPerPrincipal, MaxTransactions: fc.Sessions.MaxTransactions,
		MaxTransactionsPerPrincipal: fc.Sessions.MaxTransactionsPerPrincipal, ReplicaID: fc.ReplicaID,
		MaxSessionsPerSubject: fc.Sessions.MaxSessionsPerSubject, MaxTransactionsPerSubject: fc.Sessions.MaxTransactionsPerSubject}
	if g := fc.Shutdown.GraceSeconds; g != nil {
		cfg.ShutdownGrace, cfg.ShutdownGraceSet = seconds(*g), true
	}
	var problems []string
	cfg.CustomTools, problems = customTools(fc.CustomTools)
	for i, t := range fc.Tokens {
		secret := t.Token
		if t.TokenFile != "" {
			s, err := readSecretFile(t.TokenFile)
			if err != nil {
				problems = append(problems, fmt.Sprintf("tokens[%d].token_file: %v", i, err))
				continue
			}
			if len(s) < minTokenLen {
				problems = append(problems, fmt.Sprintf("tokens[%d].token_file: the token in %s is %d characters long; use at least %d (openssl rand -hex 24)", i, t.TokenFile, len(s), minTokenLen))
				continue
			}
			secret = s
		}
		cfg.Tokens = append(cfg.Tokens, Token{Secret: secret, Name: t.Name, Scopes: t.Scopes, Databases: t.Databases,
			MaxResponseBytes: t.MaxResponseBytes, DefaultFormat: t.DefaultFormat, Tools: t.Tools, Role: t.Role, ActAs: t.ActAs, ActAsRole: t.ActAsRole, ActAsClaims: t.ActAsClaims,
			Origin: fmt.Sprintf("config file tokens[%d]", i)})
	}
	if fc.JWT != nil {
		j, more := fc.JWT.jwtConfig()
		problems = append(problems, more...)
		cfg.JWT = j
	}
	if m := fc.MCPOAuth; m != nil {
		cfg.MCPOAuth = &MCPOAuthConfig{Resource: m.Resource, AuthorizationServers: m.AuthorizationServers, ScopesSupported: m.ScopesSupported}
	}
	cfg.MCPStructuredContent = fc.MCP.StructuredContent
	for _, name := range sortedKeys(fc.Databases) {
		d := fc.Databases[name]
		url := d.URL
		if d.URLFile != "" {
			s, err := readSecretFile(d.URLFile)
			if err != nil {
				problems = append(problems, fmt.Sprintf("databases.%s.url_file: %v", name, err))
				continue
			}
			url = s
		}
		var password string
		if d.PasswordFile != "" {
			s, err := readSecretFile(d.PasswordFile)
			if err != nil {
				problems = append(problems, fmt.Sprintf("databases.%s.password_file: %v", name, err))
				continue
			}
			password = s
		}
		p := d.Policy
		pol := tools.Policy{ReadOnly: p.ReadOnly, AllowDDL: p.AllowDDL, AllowedSchemas: p.AllowedSchemas,
			AllowTables: p.AllowTables, DenyTables: p.DenyTables, TableLists: p.TableLists, DefaultLimit: p.DefaultLimit, MaxLimit: p.MaxLimit,
			MaxResponseBytes: p.MaxResponseBytes, DefaultFormat: p.DefaultFormat, StatementTimeout: time.Duration(p.StatementTimeoutMS) * time.Millisecond,
			LockTimeout: time.Duration(p.LockTimeoutMS) * time.Millisecond, PoolWait: time.Duration(p.PoolWaitMS) * time.Millisecond,
			TransactionTimeout: time.Duration(p.TransactionTimeoutMS) * time.Millisecond,
			MaxAffectedRows:    p.MaxAffectedRows, DisabledTools: p.DisabledTools,
			ShowErrorValues: p.MaskErrorValues != nil && !*p.MaskErrorValues,
			DescribeExec:    p.PreparedStatements != nil && !*p.PreparedStatements}
		cfg.Databases[name] = DatabaseConfig{URL: url, Password: password, MaxConns: d.MaxConns, Policy: pol, Origin: "config file"}
	}
	if len(problems) > 0 {
		return nil, &ConfigError{Source: source, Problems: problems}
	}
	return cfg, nil
}

// minTokenLen is the shortest accepted API token.
const minTokenLen = 16

// readSecretFile reads a secret from a file, trimming surrounding whitespace (a trailing newline
// from echo or an editor). The error names the file, never its content.
func readSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %w", path, unwrapPathError(err))
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}

// unwrapPathError drops the *fs.PathError wrapper, whose text repeats the path.
func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ValidateConfig checks a config document against schemas/config.schema.json. The error, a
// *ConfigError, describes every problem on its own line, naming the path and the fix.
func ValidateConfig(raw []byte) error {
	if problems := validateConfigDoc(raw); len(problems) > 0 {
		return &ConfigError{Source: "the config document", Problems: problems}
	}
	return nil
}

// ParseTokens parses PGTOOLS_TOKENS / --token values: "secret:read,write;other:read", each
// optionally followed by ":ROLE", the PostgreSQL role its calls run as
// ("secret:read:tenant_agent"). Principal names are "token-1", "token-2", … in order, counting
// from startIndex.
func ParseTokens(specs []string, startIndex int) ([]Token, error) {
	var out []Token
	n := startIndex
	for _, spec := range specs {
		for _, item := range strings.Split(spec, ";") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			secret, scopeList, role, ok := splitTokenSpec(item)
			if !ok {
				return nil, fmt.Errorf("token #%d: expected secret:scopes or secret:scopes:role, e.g. s3cret-token-value:read,write", n+1)
			}
			if len(secret) < minTokenLen {
				return nil, fmt.Errorf("token #%d: secret is shorter than 16 characters; use a long random value (openssl rand -hex 24)", n+1)
			}
			scopes, bad, ok := parseScopes(scopeList)
			if !ok {
				return nil, fmt.Errorf("token #%d: unknown scope %q; scopes are read, write, ddl", n+1, bad)
			}
			if role != "" && !validRoleName(role) {
				return nil, fmt.Errorf("token #%d: role %q is not a plain PostgreSQL role name (letters, digits, _ and $, at most 63 bytes)", n+1, role)
			}
			n++
			out = append(out, Token{Secret: secret, Name: fmt.Sprintf("token-%d", n), Scopes: scopes, Role: role})
		}
	}
	return out, nil
}

// splitTokenSpec splits "secret:scopes" or "secret:scopes:role". The secret may hold colons, so
// the split is from the right: a role is recognised when the part before it is a scope list.
func splitTokenSpec(item string) (secret, scopes, role string, ok bool) {
	i := strings.LastIndexByte(item, ':')
	if i <= 0 {
		return "", "", "", false
	}
	if j := strings.LastIndexByte(item[:i], ':'); j > 0 {
		if _, _, ok := parseScopes(item[j+1 : i]); ok {
			return item[:j], item[j+1 : i], item[i+1:], true
		}
	}
	return item[:i], item[i+1:], "", true
}

// parseScopes parses "read,write"; when not ok, bad is the first unknown scope.
func parseScopes(list string) (scopes []string, bad string, ok bool) {
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		switch s {
		case "read", "write", "ddl":
			scopes = append(scopes, s)
		default:
			return nil, s, false
		}
	}
	return scopes, "", true
}

// withDefaults returns c with every unset field at its default: the Default* constants above,
// a burst of RatePerSecond rounded up (at least 1) when a rate is set, and every database's
// policy through tools.Policy.WithDefaults. The per-principal shares depend on
// ExtraPrincipals, which the command may set after Validate, so ConnLimits derives them. The
// databases map is copied, so c's is never changed.
func (c Config) withDefaults() Config {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if !c.ShutdownGraceSet && c.ShutdownGrace <= 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.Limits.RatePerSecond > 0 && c.Limits.Burst <= 0 {
		c.Limits.Burst = max(1, int(math.Ceil(c.Limits.RatePerSecond)))
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.MaxTransactions <= 0 {
		c.MaxTransactions = DefaultMaxTransactions
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.LogLevel == "" {
		c.LogLevel = DefaultLogLevel
	}
	if c.ReplicaID == "" {
		// "" when unknown or not a plain name: the session manager then picks a random tag.
		if h, err := os.Hostname(); err == nil && validReplicaID(h) {
			c.ReplicaID = h
		}
	}
	dbs := make(map[string]DatabaseConfig, len(c.Databases))
	for name, d := range c.Databases {
		if d.MaxConns <= 0 {
			d.MaxConns = DefaultMaxConns
		}
		d.Policy = d.Policy.WithDefaults()
		dbs[name] = d
	}
	c.Databases = dbs
	if c.JWT != nil {
		j := c.JWT.withDefaults()
		c.JWT = &j
	}
	if c.MCPOAuth != nil {
		m := c.MCPOAuth.withDefaults(c.JWT)
		c.MCPOAuth = &m
	}
	c.CustomTools = customToolDefaults(c.CustomTools)
	return c
}

// Validate checks the settings that span fields or sources (file, environment, flags), fills
// the defaults (withDefaults), and reports every problem at once as a *ConfigError.
func (c *Config) Validate() error {
	// The policies are checked as given: their defaults would hide a default_limit above
	// max_limit by clipping it.
	given := c.Databases
	*c = c.withDefaults()
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if len(c.Databases) == 0 {
		add("databases: no database configured: set DATABASE_URL, pass --database-url, or give a config file with databases")
	}
	if len(c.Tokens) == 0 && c.JWT == nil && !isLoopback(c.Listen) {
		add("listen: refusing to listen on %s without API tokens: add a token (--token SECRET:read or PGTOOLS_TOKENS) or listen on 127.0.0.1", c.Listen)
	}
	if c.MetricsListen != "" && c.MetricsListen == c.Listen && !strings.HasSuffix(c.Listen, ":0") {
		add("metrics_listen: %s is also the API's listen address; leave metrics_listen unset to serve /metrics there, or pick another port", c.MetricsListen)
	}
	limits := c.ConnLimits()
	if c.MaxSessionsPerPrincipal > limits.MaxSessions {
		add("sessions.max_sessions_per_principal: %d is above max_sessions %d; lower it or raise max_sessions", c.MaxSessionsPerPrincipal, limits.MaxSessions)
	}
	if c.MaxTransactionsPerPrincipal > limits.MaxTransactions {
		add("sessions.max_transactions_per_principal: %d is above max_transactions %d; lower it or raise max_transactions", c.MaxTransactionsPerPrincipal, limits.MaxTransactions)
	}
	if c.MaxSessionsPerSubject > limits.MaxSessionsPerPrincipal {
		add("sessions.max_sessions_per_subject: %d is above a token's share of %d sessions (max_sessions_per_principal); lower it or raise that share", c.MaxSessionsPerSubject, limits.MaxSessionsPerPrincipal)
	}
	if c.MaxTransactionsPerSubject > limits.MaxTransactionsPerPrincipal {
		add("sessions.max_transactions_per_subject: %d is above a token's share of %d pg_transaction calls (max_transactions_per_principal); lower it or raise that share", c.MaxTransactionsPerSubject, limits.MaxTransactionsPerPrincipal)
	}
	if !validReplicaID(c.ReplicaID) {
		add("replica_id: %q is not a replica name; use up to 63 letters, digits, '.', '_' or '-' (e.g. the pod name)", c.ReplicaID)
	}
	if l := c.Limits; l.MaxConcurrentPerSubject > 0 && (l.MaxConcurrent <= 0 || l.MaxConcurrentPerSubject > l.MaxConcurrent) {
		add("limits.max_concurrent_per_subject: %d needs limits.max_concurrent_per_token at least as high (now %d); raise that or lower this", l.MaxConcurrentPerSubject, l.MaxConcurrent)
	}
	if c.Limits.Burst > 0 && c.Limits.RatePerSecond <= 0 {
		add("limits.burst: has no effect without limits.rate_per_second; set both, or remove burst")
	}
	for _, name := range sortedKeys(given) {
		d := given[name]
		where := "databases." + name + ".url"
		if d.Origin != "" && d.Origin != "config file" {
			where = "databases." + name + " (" + d.Origin + ")"
		}
		if strings.TrimSpace(d.URL) == "" {
			add("%s: no connection string: set url (or url_file) to e.g. postgres://pgtools@db.internal:5432/app?sslmode=verify-full", where)
		} else if _, err := parseDSN(d.URL, d.Password); err != nil {
			add("%s: %v", where, err)
		}
		p := d.Policy
		if p.DefaultLimit > 0 && p.MaxLimit > 0 && p.DefaultLimit > p.MaxLimit {
			add("databases.%s.policy: default_limit %d is above max_limit %d; lower default_limit or raise max_limit", name, p.DefaultLimit, p.MaxLimit)
		} else if p.DefaultLimit > 10000 && p.MaxLimit <= 0 {
			add("databases.%s.policy: default_limit %d is above the default max_limit 10000; raise max_limit too", name, p.DefaultLimit)
		}
	}
	problems = append(problems, c.identityProblems()...)
	problems = append(problems, c.customToolProblems()...)
	problems = append(problems, tokenToolProblems(c.Tokens, c.CustomTools)...)
	names := map[string]int{}
	secrets := map[string]int{}
	for i, t := range c.Tokens {
		where := tokenWhere(t)
		if j, dup := names[t.Name]; dup {
			add("%s: the name %q is also used by %s; token names must be unique", where, t.Name, tokenWhere(c.Tokens[j]))
		} else {
			names[t.Name] = i
		}
		if j, dup := secrets[t.Secret]; dup {
			add("%s: has the same secret as %s; give every token its own secret", where, tokenWhere(c.Tokens[j]))
		} else {
			secrets[t.Secret] = i
		}
		for _, db := range t.Databases {
			if _, ok := c.Databases[db]; !ok {
				add("%s: names database %q, which is not configured (configured: %s)", where, db, strings.Join(sortedKeys(c.Databases), ", "))
			}
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		source := "the configuration"
		if c.File != "" {
			source = "the configuration (config file " + c.File + " with environment and flags)"
		}
		return &ConfigError{Source: source, Problems: problems}
	}
	return nil
}

func tokenWhere(t Token) string {
	if t.Origin != "" {
		return fmt.Sprintf("token %q (%s)", t.Name, t.Origin)
	}
	return fmt.Sprintf("token %q", t.Name)
}

// isLoopback reports whether a listen address binds only loopback interfaces.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// validReplicaID accepts "" (no name) and short plain names, which messages and logs quote.
func validReplicaID(s string) bool { return plainName(s, 63) }

// plainName reports whether s has at most max characters, each a letter, digit, '-', '_' or '.':
// a name that can go into logs and headers as it is.
func plainName(s string, max int) bool {
	if len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
