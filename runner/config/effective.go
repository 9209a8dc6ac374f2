package config

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/pgtools/pgtools/runner/auth"
)

// redacted stands in for every secret pgtools prints.
const redacted = "[REDACTED]"

// EffectiveJSON renders a validated configuration (Validate filled its defaults) as pgtools
// check-config prints it: the config file's keys with every default and where each token and database came from. Secrets
// never appear: tokens are "[REDACTED]", and a connection string is shown as its host, port,
// database, user and effective TLS mode, its password as "[REDACTED]" (or "none"). null means
// "no limit" or "none".
func (c *Config) EffectiveJSON() ([]byte, error) {
	type token struct {
		Name             string         `json:"name"`
		Token            string         `json:"token"`
		Scopes           []string       `json:"scopes"`
		Databases        []string       `json:"databases"`
		MaxResponseBytes *int           `json:"max_response_bytes"`
		DefaultFormat    *string        `json:"default_format"`
		Role             *string        `json:"role"`
		ActAs            bool           `json:"act_as"`
		ActAsRole        *string        `json:"act_as_role,omitempty"`
		ActAsClaims      map[string]any `json:"act_as_claims,omitempty"`
		Source           string         `json:"source"`
	}
	type jwtEff struct {
		Name          string   `json:"name"`
		Issuer        string   `json:"issuer"`
		Audience      *string  `json:"audience"`
		SecretFile    *string  `json:"secret_file,omitempty"`
		JWKSFile      *string  `json:"jwks_file,omitempty"`
		JWKSURL       *string  `json:"jwks_url,omitempty"`
		LeewaySeconds float64  `json:"leeway_seconds"`
		RoleClaim     string   `json:"role_claim"`
		Roles         []string `json:"roles"`
		DefaultRole   *string  `json:"default_role"`
		DefaultScopes []string `json:"default_scopes"`
		Databases     []string `json:"databases"`
	}
	type database struct {
		URL        string      `json:"url"`
		Connection ConnSummary `json:"connection"`
		Source     string      `json:"source"`
		MaxConns   int32       `json:"max_conns"`
		Policy     policyFile  `json:"policy"`
	}
	type limits struct {
		MaxBodyBytes  int64    `json:"max_body_bytes"`
		RatePerSecond *float64 `json:"rate_per_second"`
		Burst         *int     `json:"burst"`
		MaxConcurrent *int     `json:"max_concurrent_per_token"`
		PerSubject    *int     `json:"max_concurrent_per_subject"`
	}
	type sessions struct {
		MaxSessions                 int   `json:"max_sessions"`
		MaxSessionsPerPrincipal     int   `json:"max_sessions_per_principal"`
		MaxTransactions             int   `json:"max_transactions"`
		MaxTransactionsPerPrincipal int   `json:"max_transactions_per_principal"`
		MaxSessionsPerSubject       int   `json:"max_sessions_per_subject"`
		MaxTransactionsPerSubject   int   `json:"max_transactions_per_subject"`
		TTLSeconds                  int64 `json:"ttl_seconds"`
	}
	type shutdown struct {
		DrainDelaySeconds float64 `json:"drain_delay_seconds"`
		GraceSeconds      float64 `json:"grace_seconds"`
	}
	type effective struct {
		ConfigFile    *string              `json:"config_file"`
		Listen        string               `json:"listen"`
		MetricsListen *string              `json:"metrics_listen"`
		OpenAPIPublic bool                 `json:"openapi_public"`
		Tokens        []token              `json:"tokens"`
		Databases     map[string]database  `json:"databases"`
		Sessions      sessions             `json:"sessions"`
		Limits        limits               `json:"limits"`
		Shutdown      shutdown             `json:"shutdown"`
		JWT           *jwtEff              `json:"jwt,omitempty"`
		MCPOAuth      *auth.MCPOAuthConfig `json:"mcp_oauth,omitempty"`
		MCP           mcpFile              `json:"mcp"`
		AuditLog      *string              `json:"audit_log"`
		LogLevel      string               `json:"log_level"`
		CustomTools   []customToolJSON     `json:"custom_tools"`
	}
	cl := c.ConnLimits()
	e := effective{Listen: c.Listen, OpenAPIPublic: c.OpenAPIPublic, Tokens: []token{}, Databases: map[string]database{}, LogLevel: c.LogLevel,
		CustomTools: effectiveCustomTools(c.CustomTools),
		Sessions: sessions{MaxSessions: cl.MaxSessions, MaxSessionsPerPrincipal: cl.MaxSessionsPerPrincipal,
			MaxTransactions: cl.MaxTransactions, MaxTransactionsPerPrincipal: cl.MaxTransactionsPerPrincipal,
			MaxSessionsPerSubject: cl.MaxSessionsPerSubject, MaxTransactionsPerSubject: cl.MaxTransactionsPerSubject,
			TTLSeconds: int64(c.SessionTTL / time.Second)},
		Limits:   limits{MaxBodyBytes: c.MaxBodyBytes},
		Shutdown: shutdown{DrainDelaySeconds: c.DrainDelay.Seconds(), GraceSeconds: c.ShutdownGrace.Seconds()}}
	e.MCP.StructuredContent, e.MCP.AllowedOrigins = c.MCPStructuredContent, c.MCPAllowedOrigins
	if c.File != "" {
		e.ConfigFile = &c.File
	}
	if c.MetricsListen != "" {
		e.MetricsListen = &c.MetricsListen
	}
	if c.AuditLog != "" {
		e.AuditLog = &c.AuditLog
	}
	if l := c.Limits; l.RatePerSecond > 0 {
		e.Limits.RatePerSecond, e.Limits.Burst = &l.RatePerSecond, &l.Burst
	}
	if c.Limits.MaxConcurrent > 0 {
		per := c.Limits.SubjectShare()
		e.Limits.MaxConcurrent, e.Limits.PerSubject = &c.Limits.MaxConcurrent, &per
	}
	for _, t := range c.Tokens {
		dbs := t.Databases
		if len(dbs) == 0 {
			dbs = slices.Sorted(maps.Keys(c.Databases))
		}
		tok := token{Name: t.Name, Token: redacted, Scopes: t.Scopes, Databases: dbs, Source: cmp.Or(t.Origin, "config")}
		if t.MaxResponseBytes > 0 {
			tok.MaxResponseBytes = ptr(t.MaxResponseBytes)
		}
		if t.DefaultFormat != "" {
			tok.DefaultFormat = ptr(t.DefaultFormat)
		}
		if t.Role != "" {
			tok.Role = ptr(t.Role)
		}
		if tok.ActAs = t.ActAs; t.ActAs {
			tok.ActAsRole, tok.ActAsClaims = ptr(cmp.Or(t.ActAsRole, t.Role)), t.ActAsClaims
		}
		e.Tokens = append(e.Tokens, tok)
	}
	if j := c.JWT; j != nil {
		dbs := j.Databases
		if len(dbs) == 0 {
			dbs = slices.Sorted(maps.Keys(c.Databases))
		}
		e.JWT = &jwtEff{Name: j.Name, Issuer: j.Issuer, LeewaySeconds: j.Leeway.Seconds(), RoleClaim: j.RoleClaim,
			Roles: j.Roles, DefaultScopes: j.DefaultScopes, Databases: dbs}
		e.JWT.Audience = optional(j.Audience)
		if j.Audience == "" && c.MCPOAuth != nil {
			e.JWT.Audience = &c.MCPOAuth.Resource
		}
		e.JWT.SecretFile, e.JWT.JWKSFile, e.JWT.JWKSURL = optional(j.SecretFile), optional(j.JWKSFile), optional(j.JWKSURL)
		e.JWT.DefaultRole = optional(j.DefaultRole)
	}
	e.MCPOAuth = c.MCPOAuth
	for name, d := range c.Databases {
		summary, err := DescribeDSN(d.URL, d.Password)
		if err != nil {
			return nil, err
		}
		p := d.Policy
		e.Databases[name] = database{URL: redacted, Connection: summary, Source: cmp.Or(d.Origin, "config"), MaxConns: d.MaxConns,
			Policy: policyFile{ReadOnly: p.ReadOnly, AllowDDL: p.AllowDDL, AllowedSchemas: orEmpty(p.AllowedSchemas),
				AllowTables: orEmpty(p.AllowTables), DenyTables: orEmpty(p.DenyTables), TableLists: p.TableLists, DefaultLimit: p.DefaultLimit,
				MaxLimit: p.MaxLimit, MaxResponseBytes: p.MaxResponseBytes, DefaultFormat: cmp.Or(p.DefaultFormat, "objects"), StatementTimeoutMS: p.StatementTimeout.Milliseconds(),
				LockTimeoutMS: p.LockTimeout.Milliseconds(), TransactionTimeoutMS: p.TransactionTimeout.Milliseconds(), PoolWaitMS: p.PoolWait.Milliseconds(), MaxAffectedRows: p.MaxAffectedRows,
				DisabledTools: orEmpty(p.DisabledTools), MaskErrorValues: ptr(!p.ShowErrorValues),
				PreparedStatements: ptr(!p.DescribeExec)}}
	}
	return json.MarshalIndent(e, "", "  ")
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func ptr[T any](v T) *T { return &v }

// optional is nil for "", so the printed configuration says null.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
