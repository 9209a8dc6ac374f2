package config

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"net"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/invoke"
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
	// DefaultMaxBodyBytes is Limits.MaxBodyBytes when unset: 1 MiB.
	DefaultMaxBodyBytes = 1 << 20
	// DefaultAuthFailuresPerSecond is Limits.AuthFailuresPerSecond when unset.
	DefaultAuthFailuresPerSecond = 30
	// DefaultApproverCallsPerSecond is Limits.ApproverCallsPerSecond when unset.
	DefaultApproverCallsPerSecond = 30
	// DefaultMaxSessions is Sessions.MaxSessions when unset.
	DefaultMaxSessions = session.DefaultMaxSessions
	// DefaultMaxTransactions is Sessions.MaxTransactions when unset.
	DefaultMaxTransactions = 10
	// DefaultSessionTTL is Sessions.TTLSeconds when unset.
	DefaultSessionTTL = session.DefaultTTL
	// DefaultShutdownGrace is Shutdown.GraceSeconds when unset.
	DefaultShutdownGrace = 10 * time.Second
	// DefaultMaxConns is DatabaseConfig.MaxConns when unset.
	DefaultMaxConns = 10
	// DefaultN8NPrincipal is N8NConfig.Principal when unset.
	DefaultN8NPrincipal = "n8n-broker"
	// DefaultN8NTaskTimeoutMS is N8NConfig.TaskTimeoutMS when unset: n8n 3's default
	// N8N_RUNNERS_TASK_TIMEOUT (n8n 2's was 300 s).
	DefaultN8NTaskTimeoutMS = 60_000
	// DefaultLogLevel is Config.LogLevel when unset.
	DefaultLogLevel = "info"
)

// Config is the runner's whole configuration, from a config file (schemas/config.schema.json),
// environment and flags. It has the config file's shape: every field's json tag is the file's
// key, LoadConfigFile decodes the file straight into it, and check-config prints a redacted copy
// of it with every default filled (EffectiveJSON). Build it with LoadConfigFile and the caller's
// overrides, then call Validate once, which fills the defaults (withDefaults); the zero value of
// a field means its default.
type Config struct {
	// File is the config file the settings came from, "" for none (for messages).
	File string `json:"config_file,omitempty"`
	// Listen is the HTTP listen address (default "127.0.0.1:8080"). Without tokens it must be a
	// loopback address.
	Listen string `json:"listen"`
	// MetricsListen is a separate address serving only /metrics, /healthz and /readyz; "" (the
	// default) serves /metrics on Listen.
	MetricsListen string `json:"metrics_listen"`
	// OpenAPIPublic serves /openapi.json without a token, listing the built-in tools only (never
	// the operator's custom tools); a request with a token still gets its own list. Default
	// false: /openapi.json needs a token like /v1/tools.
	OpenAPIPublic bool `json:"openapi_public"`
	// Tokens are the accepted API tokens; none (and no JWT) means open access, on loopback only.
	Tokens []auth.Token `json:"tokens"`
	// JWT, when set, also accepts JSON Web Tokens from one issuer as bearer tokens (docs/design.md §11).
	JWT *auth.JWTConfig `json:"jwt,omitempty"`
	// MCPOAuth, when set, makes /mcp an OAuth 2.1 resource server; it needs JWT.
	MCPOAuth *auth.MCPOAuthConfig `json:"mcp_oauth,omitempty"`
	// MCP configures the tools on /mcp and pgtools mcp.
	MCP MCPConfig `json:"mcp"`
	// N8N joins n8n task brokers as their external task runner.
	N8N N8NConfig `json:"n8n"`
	// Databases are the configured databases by name; tools default to "default".
	Databases map[string]DatabaseConfig `json:"databases"`
	// Limits are the per-token call limits and the request body cap.
	Limits Limits `json:"limits"`
	// Sessions caps pg_tx sessions and pg_transaction calls.
	Sessions Sessions `json:"sessions"`
	// PageTokens signs select_query's next_page tokens.
	PageTokens PageTokens `json:"page_tokens"`
	// Approvals holds the approval requests of require_approval rules (approvals.go).
	Approvals Approvals `json:"approvals"`
	// Shutdown is how serve stops on SIGTERM.
	Shutdown Shutdown `json:"shutdown"`
	// AuditLog is the audit log path, "-" for stderr, "" for none.
	AuditLog string `json:"audit_log"`
	// LogLevel is debug, info (default), warn or error.
	LogLevel string `json:"log_level"`
	// ReplicaID names this runner among the replicas of a deployment: every pg_tx session id
	// starts with its tag (session.ReplicaTag), so a replica can say that a session belongs to
	// another one and a proxy can route by prefix. Default: the host name (a Kubernetes pod's
	// name). Up to 63 letters, digits, '.', '_' or '-'.
	ReplicaID string `json:"replica_id"`
	// State names the configured database (one of Databases) whose schema StateSchema keeps
	// the fleet's shared state: approval requests and the replica registry (runner/state).
	// "" (the default): approvals live in this runner's memory.
	State string `json:"state"`
	// StateSchema is the schema of State (default "pgtools"), created or upgraded at start when
	// the login role may.
	StateSchema string `json:"state_schema"`
	// Fleet is how the replicas find each other and forward session calls to the replica
	// holding the session (fleet.go), and how this one presents itself in State's registry.
	Fleet Fleet `json:"fleet"`
	// CustomTools are the operator-defined tools (docs/design.md §13), in config order. Validate fills
	// their defaults (database "default", mode "read") and checks their structure; their
	// statements are checked on their databases when the registry is built (tools.Options.CustomTools).
	CustomTools []tools.CustomTool `json:"custom_tools"`

	// Tracer, when set, traces every tool call and its database round trips with OpenTelemetry
	// (the command builds it from the OTEL_* environment: TracingEnabled, NewTracerProvider);
	// nil, the default, traces nothing.
	Tracer invoke.TracerProvider `json:"-"`
}

// MCPConfig is the config file's "mcp" object.
type MCPConfig struct {
	// StructuredContent adds outputSchema and structuredContent to the MCP tools, on /mcp and
	// pgtools mcp (mcpapi.MCPOptions.StructuredContent; default false: each result once, as text).
	StructuredContent bool `json:"structured_content"`
	// AllowedOrigins are the browser origins /mcp accepts besides its own host
	// (mcpapi.MCPOptions.AllowedOrigins; default none).
	AllowedOrigins []string `json:"allowed_origins"`
}

// Limits are the config file's "limits": the per-principal call limits, over HTTP and MCP alike
// (zero means no limit), and the request body cap.
type Limits struct {
	invoke.Limits
	// MaxBodyBytes caps a request body, in bytes (default 1 MiB).
	MaxBodyBytes int64 `json:"max_body_bytes"`
	// AuthFailuresPerSecond bounds the refused authentications (bearer tokens, /approvals
	// sign-ins) of one client address and of one credential tried, per second; more get 429
	// (default DefaultAuthFailuresPerSecond, 30).
	AuthFailuresPerSecond int `json:"auth_failures_per_second"`
	// ApproverCallsPerSecond bounds the approvals API calls of one approver per second (default
	// DefaultApproverCallsPerSecond, 30).
	ApproverCallsPerSecond int `json:"approver_calls_per_second"`
}

// Sessions are the config file's "sessions": caps on pg_tx sessions and pg_transaction calls.
// The per-principal and per-subject shares default as ConnLimits says.
type Sessions struct {
	// MaxSessions caps open pg_tx sessions (default 10 sessions).
	MaxSessions int `json:"max_sessions"`
	// MaxSessionsPerPrincipal caps the sessions one principal may hold, read-only ones included.
	MaxSessionsPerPrincipal int `json:"max_sessions_per_principal"`
	// MaxTransactions caps pg_transaction calls running at once, each holding a pooled
	// connection for its batch (default 10).
	MaxTransactions int `json:"max_transactions"`
	// MaxTransactionsPerPrincipal caps the pg_transaction calls one principal may run at once.
	MaxTransactionsPerPrincipal int `json:"max_transactions_per_principal"`
	// MaxSessionsPerSubject caps the sessions one end user of an act_as token or JWT issuer may
	// hold within the owner's share (default: half of it, at least 1).
	MaxSessionsPerSubject int `json:"max_sessions_per_subject"`
	// MaxTransactionsPerSubject caps the pg_transaction calls one end user of an act_as token or
	// JWT issuer may run at once within the owner's share (default: half of it, at least 1).
	MaxTransactionsPerSubject int `json:"max_transactions_per_subject"`
	// TTLSeconds is a session's idle lifetime in seconds (default 1800; the file gives whole
	// seconds).
	TTLSeconds float64 `json:"ttl_seconds"`
}

// TTL is TTLSeconds as a duration.
func (s Sessions) TTL() time.Duration { return seconds(s.TTLSeconds) }

// Shutdown is the config file's "shutdown".
type Shutdown struct {
	// DrainDelaySeconds is how long, after SIGTERM, /readyz answers 503 while requests are still
	// served (default 0).
	DrainDelaySeconds float64 `json:"drain_delay_seconds"`
	// GraceSeconds is how long in-flight calls may run after the listener closes before they are
	// cancelled (default 10; nil takes the default, so an explicit 0 is kept).
	GraceSeconds *float64 `json:"grace_seconds"`
}

// DrainDelay is DrainDelaySeconds as a duration.
func (s Shutdown) DrainDelay() time.Duration { return seconds(s.DrainDelaySeconds) }

// Grace is GraceSeconds as a duration (DefaultShutdownGrace when unset).
func (s Shutdown) Grace() time.Duration {
	if s.GraceSeconds == nil {
		return DefaultShutdownGrace
	}
	return seconds(*s.GraceSeconds)
}

// DatabaseConfig is one database's connection and policy.
type DatabaseConfig struct {
	// URL is the PostgreSQL connection string. It is a secret: never logged or printed; see
	// DescribeDSN for what may be shown.
	URL string `json:"url"`
	// URLFile is a file holding URL (read at load).
	URLFile string `json:"url_file,omitempty"`
	// PasswordFile is a file holding Password (read at load).
	PasswordFile string `json:"password_file,omitempty"`
	// Password, when set, replaces the password in URL (from password_file).
	Password string `json:"-"`
	// MaxConns is the stateless pool size, in connections (default 10).
	MaxConns int32 `json:"max_conns"`
	// Policy is what the operator allows on this database; Validate fills its defaults with
	// tools.Policy.WithDefaults.
	Policy tools.Policy `json:"policy"`
	// Origin says where URL came from ("config file", "env DATABASE_URL", "--database-url"), for
	// check-config and messages.
	Origin string `json:"source,omitempty"`
	// Connection is what check-config shows of URL (EffectiveJSON fills it; never read).
	Connection *ConnSummary `json:"connection,omitempty"`
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

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

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
func ParseTokens(specs []string, startIndex int) ([]auth.Token, error) {
	var out []auth.Token
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
				return nil, fmt.Errorf("token #%d: unknown scope %q; scopes are read, write, ddl, approve", n+1, bad)
			}
			if role != "" && !validRoleName(role) {
				return nil, fmt.Errorf("token #%d: role %q is not a plain PostgreSQL role name (letters, digits, _ and $, at most 63 bytes)", n+1, role)
			}
			n++
			out = append(out, auth.Token{Secret: secret, Name: fmt.Sprintf("token-%d", n), Scopes: scopes, Role: role})
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
		case "read", "write", "ddl", "approve":
			scopes = append(scopes, s)
		default:
			return nil, s, false
		}
	}
	return scopes, "", true
}

// withDefaults returns c with every unset field at its default: the Default* constants above,
// a burst of RatePerSecond rounded up (at least 1) when a rate is set, and every database's
// policy through tools.Policy.WithDefaults. The per-principal shares are left to ConnLimits,
// which derives them from the number of principals. The databases map is copied, so c's is
// never changed.
func (c Config) withDefaults() Config {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Limits.MaxBodyBytes <= 0 {
		c.Limits.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Limits.AuthFailuresPerSecond <= 0 {
		c.Limits.AuthFailuresPerSecond = DefaultAuthFailuresPerSecond
	}
	if c.Limits.ApproverCallsPerSecond <= 0 {
		c.Limits.ApproverCallsPerSecond = DefaultApproverCallsPerSecond
	}
	if c.Shutdown.GraceSeconds == nil {
		g := DefaultShutdownGrace.Seconds()
		c.Shutdown.GraceSeconds = &g
	}
	if c.Limits.RatePerSecond > 0 && c.Limits.Burst <= 0 {
		c.Limits.Burst = max(1, int(math.Ceil(c.Limits.RatePerSecond)))
	}
	if c.Sessions.MaxSessions <= 0 {
		c.Sessions.MaxSessions = DefaultMaxSessions
	}
	if c.Sessions.MaxTransactions <= 0 {
		c.Sessions.MaxTransactions = DefaultMaxTransactions
	}
	if c.Sessions.TTLSeconds <= 0 {
		c.Sessions.TTLSeconds = DefaultSessionTTL.Seconds()
	}
	if c.PageTokens.TTLSeconds <= 0 {
		c.PageTokens.TTLSeconds = DefaultPageTokenTTL.Seconds()
	}
	if c.LogLevel == "" {
		c.LogLevel = DefaultLogLevel
	}
	c.Approvals = c.Approvals.withDefaults()
	if c.StateSchema == "" {
		c.StateSchema = DefaultStateSchema
	}
	c.N8N.Principal = cmp.Or(c.N8N.Principal, DefaultN8NPrincipal)
	c.N8N.TaskTimeoutMS = cmp.Or(c.N8N.TaskTimeoutMS, DefaultN8NTaskTimeoutMS)
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
		j := c.JWT.WithDefaults()
		c.JWT = &j
	}
	if c.MCPOAuth != nil {
		m := c.MCPOAuth.WithDefaults(c.JWT)
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
	if c.Sessions.MaxSessionsPerPrincipal > limits.MaxSessions {
		add("sessions.max_sessions_per_principal: %d is above max_sessions %d; lower it or raise max_sessions", c.Sessions.MaxSessionsPerPrincipal, limits.MaxSessions)
	}
	if c.Sessions.MaxTransactionsPerPrincipal > limits.MaxTransactions {
		add("sessions.max_transactions_per_principal: %d is above max_transactions %d; lower it or raise max_transactions", c.Sessions.MaxTransactionsPerPrincipal, limits.MaxTransactions)
	}
	if c.Sessions.MaxSessionsPerSubject > limits.MaxSessionsPerPrincipal {
		add("sessions.max_sessions_per_subject: %d is above a token's share of %d sessions (max_sessions_per_principal); lower it or raise that share", c.Sessions.MaxSessionsPerSubject, limits.MaxSessionsPerPrincipal)
	}
	if c.Sessions.MaxTransactionsPerSubject > limits.MaxTransactionsPerPrincipal {
		add("sessions.max_transactions_per_subject: %d is above a token's share of %d pg_transaction calls (max_transactions_per_principal); lower it or raise that share", c.Sessions.MaxTransactionsPerSubject, limits.MaxTransactionsPerPrincipal)
	}
	for _, p := range c.Fleet.problems() {
		add("%s", p)
	}
	if c.Fleet.Forwards() && c.ReplicaID == "" {
		add("replica_id: forwarding between replicas needs each replica named (--replica-id or PGTOOLS_REPLICA_ID; default the host name)")
	}
	if !validReplicaID(c.ReplicaID) {
		add("replica_id: %q is not a replica name; use up to 63 letters, digits, '.', '_' or '-' (e.g. the pod name)", c.ReplicaID)
	}
	if l := c.Limits; l.MaxConcurrentPerSubject > 0 && (l.MaxConcurrentPerToken <= 0 || l.MaxConcurrentPerSubject > l.MaxConcurrentPerToken) {
		add("limits.max_concurrent_per_subject: %d needs limits.max_concurrent_per_token at least as high (now %d); raise that or lower this", l.MaxConcurrentPerSubject, l.MaxConcurrentPerToken)
	}
	if c.Limits.Burst > 0 && c.Limits.RatePerSecond <= 0 {
		add("limits.burst: has no effect without limits.rate_per_second; set both, or remove burst")
	}
	for _, name := range slices.Sorted(maps.Keys(given)) {
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
	problems = append(problems, c.n8nProblems()...)
	problems = append(problems, c.identityProblems()...)
	problems = append(problems, c.customToolProblems()...)
	problems = append(problems, c.approvalProblems()...)
	problems = append(problems, c.stateProblems()...)
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
				add("%s: names database %q, which is not configured (configured: %s)", where, db, strings.Join(slices.Sorted(maps.Keys(c.Databases)), ", "))
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

func tokenWhere(t auth.Token) string {
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
func validReplicaID(s string) bool { return PlainName(s, 63) }

// PlainName reports whether s has at most max characters, each a letter, digit, '-', '_' or '.':
// a name that can go into logs and headers as it is.
func PlainName(s string, max int) bool {
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
