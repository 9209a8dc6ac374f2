package config

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/tools/approval"
)

// redacted stands in for every secret pgtools prints.
const redacted = "[REDACTED]"

// EffectiveJSON renders a validated configuration (Validate filled its defaults) as pgtools
// check-config prints it: a redacted copy of c, so the config file's keys, with every default
// filled in (the per-principal shares too) and where each token and database came from
// ("source"). Secrets never appear: tokens are "[REDACTED]", and a connection string is shown as
// its host, port, database, user and effective TLS mode ("connection"), its password as
// "[REDACTED]" (or "none"). 0 or "" means "no limit" or "none".
func (c *Config) EffectiveJSON() ([]byte, error) {
	// Shallower fields win over the embedded Config's of the same key: custom tools are shown
	// with the input schema they are served with.
	type pageTokens struct {
		PageTokens
		Key string `json:"key"` // where the key comes from, never the key
	}
	type view struct {
		Config
		CustomTools []customToolJSON `json:"custom_tools"`
		PageTokens  pageTokens       `json:"page_tokens"`
	}
	v := view{Config: *c, CustomTools: effectiveCustomTools(c.CustomTools), PageTokens: pageTokens{PageTokens: c.PageTokens, Key: redacted}}
	if c.PageTokens.KeyFile == "" {
		v.PageTokens.Key = "made at start: tokens work on this runner only, until it restarts (set key_file to share one across replicas)"
	}
	all := slices.Sorted(maps.Keys(c.Databases))
	cl := c.ConnLimits()
	v.Sessions = Sessions{MaxSessions: cl.MaxSessions, MaxSessionsPerPrincipal: cl.MaxSessionsPerPrincipal,
		MaxTransactions: cl.MaxTransactions, MaxTransactionsPerPrincipal: cl.MaxTransactionsPerPrincipal,
		MaxSessionsPerSubject: cl.MaxSessionsPerSubject, MaxTransactionsPerSubject: cl.MaxTransactionsPerSubject,
		TTLSeconds: c.Sessions.TTLSeconds}
	v.N8N.Brokers, v.MCP.AllowedOrigins = orEmpty(c.N8N.Brokers), orEmpty(c.MCP.AllowedOrigins)
	if v.N8N.Token != "" {
		v.N8N.Token = redacted
	}
	if c.Limits.MaxConcurrentPerToken > 0 {
		v.Limits.MaxConcurrentPerSubject = c.Limits.SubjectShare()
	}
	v.Tokens = make([]auth.Token, len(c.Tokens))
	for i, t := range c.Tokens {
		t.Secret, t.Origin = redacted, cmp.Or(t.Origin, "config")
		if len(t.Databases) == 0 {
			t.Databases = all
		}
		if t.ActAs {
			t.ActAsRole = cmp.Or(t.ActAsRole, t.Role)
		}
		v.Tokens[i] = t
	}
	if c.JWT != nil {
		j := *c.JWT
		if len(j.Databases) == 0 {
			j.Databases = all
		}
		if j.Audience == "" && c.MCPOAuth != nil {
			j.Audience = c.MCPOAuth.Resource
		}
		v.JWT = &j
	}
	v.Databases = make(map[string]DatabaseConfig, len(c.Databases))
	for name, d := range c.Databases {
		summary, err := DescribeDSN(d.URL, d.Password)
		if err != nil {
			return nil, err
		}
		d.URL, d.Connection, d.Origin = redacted, &summary, cmp.Or(d.Origin, "config")
		p := &d.Policy
		p.AllowedSchemas, p.AllowTables, p.DenyTables = orEmpty(p.AllowedSchemas), orEmpty(p.AllowTables), orEmpty(p.DenyTables)
		p.DisabledTools, p.DefaultFormat = orEmpty(p.DisabledTools), cmp.Or(p.DefaultFormat, "objects")
		if p.RequireApproval == nil {
			p.RequireApproval = []approval.Rule{}
		}
		p.MaskErrorValues, p.PreparedStatements = ptr(p.MasksErrorValues()), ptr(p.PreparesStatements())
		v.Databases[name] = d
	}
	return json.MarshalIndent(v, "", "  ")
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func ptr[T any](v T) *T { return &v }
