package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/pgtools/pgtools/schemas"
	"github.com/pgtools/pgtools/tools"
)

// Config is the runner's whole configuration, from a config file (schemas/config.schema.json),
// environment and flags.
type Config struct {
	// Listen is the HTTP listen address (default "127.0.0.1:8080"). Without tokens it must be a
	// loopback address.
	Listen string
	// Tokens are the accepted API tokens; none means open access, on loopback only.
	Tokens []Token
	// Databases are the configured databases by name; tools default to "default".
	Databases map[string]DatabaseConfig
	// MaxBodyBytes caps a request body (default 1 MiB).
	MaxBodyBytes int64
	// LogLevel is debug, info (default), warn or error.
	LogLevel string
	// AuditLog is the audit log path, "-" for stderr, "" for none.
	AuditLog string
	// MaxSessions caps open pg_tx sessions (default 10).
	MaxSessions int
	// SessionTTL is a session's idle lifetime (default 30 minutes).
	SessionTTL time.Duration
}

// DatabaseConfig is one database's connection and policy.
type DatabaseConfig struct {
	// URL is the PostgreSQL connection string. It is a secret: never logged.
	URL string
	// MaxConns is the stateless pool size (default 10).
	MaxConns int32
	// Policy is what the operator allows on this database.
	Policy tools.Policy
}

// fileConfig mirrors config.schema.json.
type fileConfig struct {
	Listen string `json:"listen"`
	Tokens []struct {
		Token     string   `json:"token"`
		TokenFile string   `json:"token_file"`
		Name      string   `json:"name"`
		Scopes    []string `json:"scopes"`
		Databases []string `json:"databases"`
	} `json:"tokens"`
	Databases map[string]struct {
		URL      string `json:"url"`
		URLFile  string `json:"url_file"`
		MaxConns int32  `json:"max_conns"`
		Policy   struct {
			ReadOnly           bool     `json:"read_only"`
			AllowDDL           bool     `json:"allow_ddl"`
			AllowedSchemas     []string `json:"allowed_schemas"`
			AllowTables        []string `json:"allow_tables"`
			DenyTables         []string `json:"deny_tables"`
			DefaultLimit       int      `json:"default_limit"`
			MaxLimit           int      `json:"max_limit"`
			MaxResponseBytes   int      `json:"max_response_bytes"`
			StatementTimeoutMS int64    `json:"statement_timeout_ms"`
			LockTimeoutMS      int64    `json:"lock_timeout_ms"`
			MaxAffectedRows    int      `json:"max_affected_rows"`
			DisabledTools      []string `json:"disabled_tools"`
			MaskErrorValues    *bool    `json:"mask_error_values"`
		} `json:"policy"`
	} `json:"databases"`
	Limits struct {
		MaxBodyBytes int64 `json:"max_body_bytes"`
	} `json:"limits"`
	Sessions struct {
		MaxSessions int   `json:"max_sessions"`
		TTLSeconds  int64 `json:"ttl_seconds"`
	} `json:"sessions"`
	AuditLog string `json:"audit_log"`
	LogLevel string `json:"log_level"`
}

// LoadConfigFile reads and validates a JSON config file. Every schema violation is reported, one
// line per path, naming the fix.
func LoadConfigFile(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config file: %w", err)
	}
	if err := ValidateConfig(raw); err != nil {
		return nil, fmt.Errorf("config file %s %w", path, err)
	}
	var fc fileConfig
	if err := json.Unmarshal(raw, &fc); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	cfg := &Config{Listen: fc.Listen, Databases: map[string]DatabaseConfig{}, MaxBodyBytes: fc.Limits.MaxBodyBytes,
		LogLevel: fc.LogLevel, AuditLog: fc.AuditLog, MaxSessions: fc.Sessions.MaxSessions,
		SessionTTL: time.Duration(fc.Sessions.TTLSeconds) * time.Second}
	for i, t := range fc.Tokens {
		secret := t.Token
		if t.TokenFile != "" {
			b, err := os.ReadFile(t.TokenFile)
			if err != nil {
				return nil, fmt.Errorf("tokens[%d].token_file: %w", i, err)
			}
			secret = strings.TrimSpace(string(b))
		}
		cfg.Tokens = append(cfg.Tokens, Token{Secret: secret, Name: t.Name, Scopes: t.Scopes, Databases: t.Databases})
	}
	for name, d := range fc.Databases {
		url := d.URL
		if d.URLFile != "" {
			b, err := os.ReadFile(d.URLFile)
			if err != nil {
				return nil, fmt.Errorf("databases.%s.url_file: %w", name, err)
			}
			url = strings.TrimSpace(string(b))
		}
		p := d.Policy
		pol := tools.Policy{ReadOnly: p.ReadOnly, AllowDDL: p.AllowDDL, AllowedSchemas: p.AllowedSchemas,
			AllowTables: p.AllowTables, DenyTables: p.DenyTables, DefaultLimit: p.DefaultLimit, MaxLimit: p.MaxLimit,
			MaxResponseBytes: p.MaxResponseBytes, StatementTimeout: time.Duration(p.StatementTimeoutMS) * time.Millisecond,
			LockTimeout: time.Duration(p.LockTimeoutMS) * time.Millisecond, MaxAffectedRows: p.MaxAffectedRows,
			DisabledTools: p.DisabledTools, ShowErrorValues: p.MaskErrorValues != nil && !*p.MaskErrorValues}
		if pol.DefaultLimit > 0 && pol.MaxLimit > 0 && pol.DefaultLimit > pol.MaxLimit {
			return nil, fmt.Errorf("databases.%s.policy: default_limit %d is above max_limit %d; lower default_limit or raise max_limit", name, pol.DefaultLimit, pol.MaxLimit)
		}
		cfg.Databases[name] = DatabaseConfig{URL: url, MaxConns: d.MaxConns, Policy: pol}
	}
	return cfg, nil
}

// ValidateConfig checks a config document against schemas/config.schema.json and describes every
// problem on its own line.
func ValidateConfig(raw []byte) error {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		return fmt.Errorf("is not valid JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	sdoc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(schemas.Config())))
	if err != nil {
		return fmt.Errorf("config schema: %w", err)
	}
	if err := c.AddResource("mem://config.schema.json", sdoc); err != nil {
		return fmt.Errorf("config schema: %w", err)
	}
	sch, err := c.Compile("mem://config.schema.json")
	if err != nil {
		return fmt.Errorf("config schema: %w", err)
	}
	if err := sch.Validate(doc); err != nil {
		return fmt.Errorf("is invalid:\n%s", describeValidation(err))
	}
	return nil
}

func describeValidation(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return "  " + err.Error()
	}
	p := message.NewPrinter(language.English)
	byPath := map[string][]string{}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		path := strings.Join(e.InstanceLocation, ".")
		if path == "" {
			path = "(top level)"
		}
		byPath[path] = append(byPath[path], e.ErrorKind.LocalizedString(p))
	}
	walk(ve)
	lines := make([]string, 0, len(byPath))
	for path, msgs := range byPath {
		// Alternatives (oneOf: url or url_file) read as one line.
		lines = append(lines, "  "+path+": "+strings.Join(msgs, ", or "))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// ParseTokens parses PGTOOLS_TOKENS / --token values: "secret:read,write;other:read".
// Principal names are "token-1", "token-2", … in order.
func ParseTokens(specs []string, startIndex int) ([]Token, error) {
	var out []Token
	n := startIndex
	for _, spec := range specs {
		for _, item := range strings.Split(spec, ";") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			i := strings.LastIndexByte(item, ':')
			if i <= 0 {
				return nil, fmt.Errorf("token #%d: expected secret:scopes, e.g. s3cret-token-value:read,write", n+1)
			}
			secret, scopeList := item[:i], item[i+1:]
			if len(secret) < 16 {
				return nil, fmt.Errorf("token #%d: secret is shorter than 16 characters; use a long random value (openssl rand -hex 24)", n+1)
			}
			var scopes []string
			for _, s := range strings.Split(scopeList, ",") {
				s = strings.TrimSpace(s)
				switch s {
				case "read", "write", "ddl":
					scopes = append(scopes, s)
				default:
					return nil, fmt.Errorf("token #%d: unknown scope %q; scopes are read, write, ddl", n+1, s)
				}
			}
			n++
			out = append(out, Token{Secret: secret, Name: fmt.Sprintf("token-%d", n), Scopes: scopes})
		}
	}
	return out, nil
}

// Validate checks the settings that span fields and fills defaults.
func (c *Config) Validate() error {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8080"
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 1 << 20
	}
	if len(c.Databases) == 0 {
		return errors.New("no database configured: set DATABASE_URL, pass --database-url, or give a config file with databases")
	}
	if len(c.Tokens) == 0 && !isLoopback(c.Listen) {
		return fmt.Errorf("refusing to listen on %s without API tokens: add a token (--token SECRET:read or PGTOOLS_TOKENS) or listen on 127.0.0.1", c.Listen)
	}
	seen := map[string]bool{}
	for _, t := range c.Tokens {
		if seen[t.Name] {
			return fmt.Errorf("two tokens are named %q; token names must be unique", t.Name)
		}
		seen[t.Name] = true
		for _, db := range t.Databases {
			if _, ok := c.Databases[db]; !ok {
				return fmt.Errorf("token %q names database %q, which is not configured", t.Name, db)
			}
		}
	}
	return nil
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
