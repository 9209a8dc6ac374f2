package runnertest

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/auth/authtest"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/toolstest"
)

// JWTFixture is the HTTP API over a fresh database, accepting JWTs of iss (JWKS URL) as role.
// Its database has table probe (id, tenant), which Role may read and insert into.
type JWTFixture struct {
	Srv  *httptest.Server
	Log  *pgtest.SyncBuffer // the access and call log
	DB   *pgtest.DB
	Role string // the role the JWTs may name (jwt.roles)
}

// NewJWTFixture serves the HTTP API with the JWT settings jc, Role added to its roles.
func NewJWTFixture(t testing.TB, jc auth.JWTConfig) *JWTFixture {
	t.Helper()
	db := pgtest.New(t)
	role := db.RoleName("agent")
	db.Exec(t, `CREATE ROLE `+role+` NOLOGIN`)
	db.Exec(t, `CREATE TABLE probe (id int PRIMARY KEY, tenant text); GRANT SELECT, INSERT ON probe TO `+role)
	jc.Roles = append(jc.Roles, role)
	cfg := &config.Config{Databases: map[string]config.DatabaseConfig{"default": {URL: db.DSN}}, JWT: &jc}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	reg := toolstest.Registry(t, db.DSN, tools.Policy{}, 4)
	logs := &pgtest.SyncBuffer{}
	srv := httptest.NewServer(httpapi.NewHandlerWith(reg, httpapi.HandlerOptions{Log: zerolog.New(logs), JWT: cfg.JWT, MCPOAuth: cfg.MCPOAuth}))
	t.Cleanup(srv.Close)
	return &JWTFixture{Srv: srv, Log: logs, DB: db, Role: role}
}

// Post sends body as JSON to path with token and the name, value pairs of header, and returns
// the status, the decoded body and the headers.
func (f *JWTFixture) Post(t testing.TB, path, token, body string, header ...string) (int, map[string]any, http.Header) {
	t.Helper()
	req := apitest.Request(http.MethodPost, f.Srv.URL+path, token, body)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	return apitest.Do(t, req)
}

// InsertProbe is an execute_sql call that inserts a row into probe.
const InsertProbe = `{"sql": "INSERT INTO probe VALUES (1, 'x')", "mode": "write", "autocommit": true}`

// MCPResource is IdentityFixture's OAuth resource: the audience of access tokens for /mcp.
const MCPResource = "https://pgtools.test.invalid/mcp"

// IdentityFixture is the HTTP API over a database with a table under row-level security: rows
// of a tenant are visible and writable only to calls whose request.jwt.claims name that tenant.
// Tokens: "hub" may act for users (role agent, fixed claim app=crm), "plain" may not; JWTs of
// iss are accepted with audience authtest.Audience on the API and MCPResource on /mcp.
type IdentityFixture struct {
	JWTFixture
	Iss *authtest.JWKSIssuer
}

// NewIdentityFixture serves the fixture's database as pgtools serve builds it
// (NewServerFixture): ActAsToken is "hub", PlainToken "plain".
func NewIdentityFixture(t testing.TB) *IdentityFixture {
	t.Helper()
	db := pgtest.New(t)
	role := db.RoleName("agent")
	db.Exec(t, `CREATE ROLE `+role+` NOLOGIN`)
	db.Exec(t, `CREATE TABLE probe (id int PRIMARY KEY, tenant text); GRANT SELECT, INSERT ON probe TO `+role)
	db.Exec(t, `CREATE TABLE docs (id int PRIMARY KEY, tenant text NOT NULL, body text);
		INSERT INTO docs VALUES (1, 'a', 'a1'), (2, 'a', 'a2'), (3, 'b', 'b1');
		ALTER TABLE docs ENABLE ROW LEVEL SECURITY;
		CREATE POLICY by_tenant ON docs USING (tenant = current_setting('request.jwt.claims', true)::jsonb ->> 'tenant')
			WITH CHECK (tenant = current_setting('request.jwt.claims', true)::jsonb ->> 'tenant');
		GRANT SELECT, INSERT, UPDATE, DELETE ON docs TO `+role)
	iss := authtest.NewIssuer(t)
	cfg := &config.Config{Databases: map[string]config.DatabaseConfig{"default": {URL: db.DSN}},
		Tokens: []auth.Token{
			{Secret: ActAsToken, Name: "hub", Scopes: []string{"read", "write"}, Role: role, ActAs: true, ActAsClaims: map[string]any{"app": "crm"}},
			{Secret: PlainToken, Name: "plain", Scopes: []string{"read", "write"}},
		},
		JWT:      &auth.JWTConfig{Issuer: authtest.Issuer, Audience: authtest.Audience, JWKSURL: iss.URL(), Roles: []string{role}},
		MCPOAuth: &auth.MCPOAuthConfig{Resource: MCPResource}}
	// As pgtools serve builds it: sessions, limits, metrics.
	sf := NewServerFixture(t, cfg)
	return &IdentityFixture{JWTFixture: JWTFixture{Srv: sf.HTTP, Log: sf.Log, DB: db, Role: role}, Iss: iss}
}

// TenantToken is a JWT of Iss for subject sub whose claims name tenant.
func (f *IdentityFixture) TenantToken(t testing.TB, sub, tenant string) string {
	return authtest.Sign(t, jwt.SigningMethodRS256, "rsa-1", f.Iss.RSA, authtest.With(authtest.ValidClaims(sub, f.Role), "tenant", tenant))
}
