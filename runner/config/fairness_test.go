package config

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/auth"
)

func TestConnLimitsDefaults(t *testing.T) {
	t.Parallel()
	tok := func(name string) auth.Token {
		return auth.Token{Secret: name + "-secret-0123456789", Name: name, Scopes: []string{"read"}}
	}
	actAs := func(name string) auth.Token {
		t := tok(name)
		t.ActAs = true
		return t
	}
	cases := []struct {
		name string
		cfg  Config
		want ConnLimits
	}{
		{"open loopback: one principal gets all", Config{}, ConnLimits{10, 10, 10, 10, 5, 5}},
		{"a single token gets all", Config{Tokens: []auth.Token{tok("a")}}, ConnLimits{10, 10, 10, 10, 5, 5}},
		{"a single act_as token gets all, each subject half of it", Config{Tokens: []auth.Token{actAs("hub")}}, ConnLimits{10, 10, 10, 10, 5, 5}},
		{"two tokens get half each", Config{Tokens: []auth.Token{tok("a"), tok("b")}}, ConnLimits{10, 5, 10, 5, 2, 2}},
		{"a token beside a JWT issuer gets half", Config{Tokens: []auth.Token{tok("a")}, JWT: &auth.JWTConfig{}}, ConnLimits{10, 5, 10, 5, 2, 2}},
		{"a token beside the n8n broker gets half", Config{Tokens: []auth.Token{tok("a")}, N8N: N8NConfig{Brokers: []string{"http://127.0.0.1:5679"}}}, ConnLimits{10, 5, 10, 5, 2, 2}},
		{"half of one slot is still one", Config{Sessions: Sessions{MaxSessions: 1, MaxTransactions: 3}, Tokens: []auth.Token{tok("a"), tok("b")}}, ConnLimits{1, 1, 3, 1, 1, 1}},
		{"explicit shares win", Config{Sessions: Sessions{MaxSessions: 20, MaxSessionsPerPrincipal: 3, MaxTransactions: 4, MaxTransactionsPerPrincipal: 4,
			MaxSessionsPerSubject: 3}, Tokens: []auth.Token{tok("a"), tok("b")}}, ConnLimits{20, 3, 4, 4, 3, 2}},
	}
	for _, c := range cases {
		if got := c.cfg.ConnLimits(); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestConnLimitsConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := apitest.WriteFile(t, dir, "pgtools.json", `{
	  "tokens": [{"name": "reader", "token": "reader-secret-0123456789", "scopes": ["read"], "max_response_bytes": 4096},
	             {"name": "writer", "token": "writer-secret-0123456789", "scopes": ["read", "write"]}],
	  "databases": {"default": {"url": "postgres://app@db.internal/app"}},
	  "sessions": {"max_sessions": 6, "max_sessions_per_principal": 2, "max_transactions": 8, "max_transactions_per_subject": 3}}`)
	cfg, err := LoadConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Tokens[0].MaxResponseBytes != 4096 || cfg.Tokens[1].MaxResponseBytes != 0 {
		t.Errorf("token max_response_bytes: %+v", cfg.Tokens)
	}
	if p, terr := auth.NewAuthenticator(cfg.Tokens).Authenticate(bearerRequest("reader-secret-0123456789")); terr != nil || p.MaxResponseBytes != 4096 {
		t.Errorf("the reader's principal does not carry its cap: %+v", p)
	}
	raw, err := cfg.EffectiveJSON()
	if err != nil {
		t.Fatal(err)
	}
	var eff struct {
		Tokens []struct {
			Name             string
			MaxResponseBytes *int `json:"max_response_bytes"`
		}
		Sessions map[string]int
	}
	if err := json.Unmarshal(raw, &eff); err != nil {
		t.Fatal(err)
	}
	if eff.Tokens[0].MaxResponseBytes == nil || *eff.Tokens[0].MaxResponseBytes != 4096 || eff.Tokens[1].MaxResponseBytes == nil || *eff.Tokens[1].MaxResponseBytes != 0 {
		t.Errorf("effective tokens: %s", raw)
	}
	want := map[string]int{"max_sessions": 6, "max_sessions_per_principal": 2, "max_transactions": 8,
		"max_transactions_per_principal": 4, "max_sessions_per_subject": 1, "max_transactions_per_subject": 3, "ttl_seconds": 1800}
	for k, v := range want {
		if eff.Sessions[k] != v {
			t.Errorf("effective sessions.%s = %d, want %d (%v)", k, eff.Sessions[k], v, eff.Sessions)
		}
	}

	cfg.Sessions.MaxSessionsPerPrincipal, cfg.Sessions.MaxTransactionsPerPrincipal = 7, 9
	cfg.Sessions.MaxSessionsPerSubject, cfg.Sessions.MaxTransactionsPerSubject = 0, 0
	var ce *ConfigError
	if err := cfg.Validate(); !errors.As(err, &ce) || len(ce.Problems) != 2 ||
		!strings.Contains(err.Error(), "max_sessions_per_principal: 7 is above max_sessions 6") ||
		!strings.Contains(err.Error(), "max_transactions_per_principal: 9 is above max_transactions 8") {
		t.Errorf("shares above the totals: %v", err)
	}
	cfg.Sessions.MaxSessionsPerPrincipal, cfg.Sessions.MaxTransactionsPerPrincipal = 2, 4
	cfg.Sessions.MaxSessionsPerSubject, cfg.Sessions.MaxTransactionsPerSubject = 3, 5
	if err := cfg.Validate(); !errors.As(err, &ce) || len(ce.Problems) != 2 ||
		!strings.Contains(err.Error(), "max_sessions_per_subject: 3 is above a token's share of 2 sessions") ||
		!strings.Contains(err.Error(), "max_transactions_per_subject: 5 is above a token's share of 4 pg_transaction calls") {
		t.Errorf("subject shares above the token's: %v", err)
	}
}

func TestSharedRoleNotes(t *testing.T) {
	t.Parallel()
	cfg := &Config{
		Databases: map[string]DatabaseConfig{"default": {URL: "postgres://app@db/app"}, "reports": {URL: "postgres://ro@db/app"},
			"a": {URL: "postgres://a@db/app"}},
		Tokens: []auth.Token{
			{Name: "n8n", Scopes: []string{"write", "read"}, Databases: []string{"default", "reports"}},
			{Name: "viewer", Scopes: []string{"read"}, Databases: []string{"default"}},
			{Name: "writer2", Scopes: []string{"read", "write"}, Databases: []string{"reports"}},
			{Name: "solo", Scopes: []string{"read"}, Databases: []string{"a"}},
		},
	}
	notes := cfg.SharedRoleNotes()
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "databases.default: ") || !strings.Contains(notes[0], `"n8n" (read,write), "viewer" (read)`) ||
		!strings.Contains(notes[0], "pg_terminate_backend") || !strings.Contains(notes[0], "pg_stat_activity.query") {
		t.Fatalf("notes: %q", notes)
	}
	// A token without a database list shares every entry.
	cfg.Tokens = append(cfg.Tokens, auth.Token{Name: "ops", Scopes: []string{"read", "write", "ddl"}})
	if notes := cfg.SharedRoleNotes(); len(notes) != 3 {
		t.Fatalf("with an all-databases token: %q", notes)
	}
}

// loadConfig writes a config file into a fresh directory and loads it as serve does.
func loadConfig(t *testing.T, doc string) *Config {
	t.Helper()
	cfg, err := LoadConfigFile(apitest.WriteFile(t, t.TempDir(), "pgtools.json", doc))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func bearerRequest(token string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/tools/select_query", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	return r
}

// TestCallBoundsConfig: policy.transaction_timeout_ms and the per-subject shares flow from the
// config file into the policy and the limits, and check-config's effective view shows them with
// their defaults (twice the statement timeout; half the token's concurrency).
func TestCallBoundsConfig(t *testing.T) {
	t.Parallel()
	cfg := loadConfig(t, `{
	  "tokens": [{"name": "hub", "token": "hub-secret-0123456789", "scopes": ["read"], "act_as": true}],
	  "databases": {"default": {"url": "postgres://app@db.internal/app", "policy": {"statement_timeout_ms": 1500, "transaction_timeout_ms": 700}},
	                "reports": {"url": "postgres://ro@db.internal/app", "policy": {"statement_timeout_ms": 1500}}},
	  "limits": {"max_concurrent_per_token": 6},
	  "sessions": {"max_sessions_per_subject": 4}}`)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := cfg.Databases["default"].Policy.TransactionTimeout; got != 700*time.Millisecond {
		t.Errorf("default's transaction timeout = %s, want the file's 700ms", got)
	}
	if got := cfg.Databases["reports"].Policy.TransactionTimeout; got != 3*time.Second {
		t.Errorf("reports' transaction timeout = %s, want twice its statement timeout", got)
	}
	raw, err := cfg.EffectiveJSON()
	if err != nil {
		t.Fatal(err)
	}
	var eff struct {
		Databases map[string]struct {
			Policy map[string]any
		}
		Limits   map[string]any
		Sessions map[string]int
	}
	if err := json.Unmarshal(raw, &eff); err != nil {
		t.Fatal(err)
	}
	if eff.Databases["default"].Policy["transaction_timeout_ms"] != 700.0 || eff.Databases["reports"].Policy["transaction_timeout_ms"] != 3000.0 {
		t.Errorf("effective transaction_timeout_ms: %s", raw)
	}
	if eff.Limits["max_concurrent_per_subject"] != 3.0 || eff.Sessions["max_sessions_per_subject"] != 4 || eff.Sessions["max_transactions_per_subject"] != 5 {
		t.Errorf("effective subject shares: limits %v, sessions %v", eff.Limits, eff.Sessions)
	}
	cfg.Limits.MaxConcurrentPerSubject = 7
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "limits.max_concurrent_per_subject: 7 needs limits.max_concurrent_per_token at least as high (now 6)") {
		t.Errorf("a subject concurrency above the token's: %v", err)
	}
}
