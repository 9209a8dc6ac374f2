package runner_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/auth/authtest"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
)

const quotaOtherToken = "quota-other-token-0123456789"

// quotaFixture is serve's wiring with 6 session slots and 6 pg_transaction slots shared by three
// owners: the act_as token "hub", the plain token "other" and a JWT issuer. Each owner's share is
// therefore 3, and a subject's share within it 1.
type quotaFixture struct {
	*runnertest.ServerFixture
	db   *pgtest.DB
	iss  *authtest.JWKSIssuer
	role string
}

func newQuotaFixture(t *testing.T) *quotaFixture {
	t.Helper()
	db := pgtest.New(t)
	role := db.RoleName("agent")
	db.Exec(t, `CREATE ROLE `+role+` NOLOGIN`)
	db.Exec(t, `CREATE TABLE probe (id int PRIMARY KEY, tenant text); GRANT SELECT, INSERT ON probe TO `+role)
	iss := authtest.NewIssuer(t)
	cfg := &config.Config{Databases: map[string]config.DatabaseConfig{"default": {URL: db.DSN, Policy: tools.Policy{PoolWait: 300 * time.Millisecond}}},
		Sessions: config.Sessions{MaxSessions: 6, MaxTransactions: 6},
		Tokens: []auth.Token{
			{Secret: runnertest.ActAsToken, Name: "hub", Scopes: []string{"read", "write"}, Role: role, ActAs: true},
			{Secret: quotaOtherToken, Name: "other", Scopes: []string{"read", "write"}},
		},
		JWT: &auth.JWTConfig{Issuer: authtest.Issuer, Audience: authtest.Audience, JWKSURL: iss.URL(), Roles: []string{role}}}
	return &quotaFixture{ServerFixture: runnertest.NewServerFixture(t, cfg), db: db, iss: iss, role: role}
}

// caller is one end user of an owner: the bearer token and the headers its requests carry.
type caller struct {
	token  string
	header []string
}

func (f *quotaFixture) hubSubject(i int) caller {
	return caller{token: runnertest.ActAsToken, header: []string{auth.ActAsHeader, fmt.Sprintf("quota-sub-%d", i)}}
}

func (f *quotaFixture) jwtSubject(t *testing.T, i int) caller {
	return caller{token: authtest.Sign(t, jwt.SigningMethodRS256, "rsa-1", f.iss.RSA, authtest.ValidClaims(fmt.Sprintf("quota-sub-%d", i), f.role))}
}

func (f *quotaFixture) post(t *testing.T, c caller, tool, body string) (int, map[string]any) {
	t.Helper()
	req := apitest.Request(http.MethodPost, f.HTTP.URL+"/v1/tools/"+tool, c.token, body)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(c.header); i += 2 {
		req.Header.Add(c.header[i], c.header[i+1])
	}
	status, resp, _ := apitest.Do(t, req)
	return status, resp
}

// beginAll begins one session for each of 7 subjects of an owner, in order, and returns the ids
// of those that opened and the refusals of the others.
func (f *quotaFixture) beginAll(t *testing.T, subject func(int) caller) (ids map[int]string, refused []map[string]any) {
	t.Helper()
	ids = map[int]string{}
	for i := 0; i < 7; i++ {
		status, body := f.post(t, subject(i), "pg_tx", `{"action":"begin"}`)
		switch {
		case status == 200:
			ids[i] = body["session_id"].(string)
		case status == 429 && body["errorType"] == "session_limit_reached":
			refused = append(refused, body)
		default:
			t.Fatalf("begin of subject %d: %d %v", i, status, body)
		}
	}
	return ids, refused
}

// TestSubjectsShareTheirOwnersSessionSlots is issue 24's hog: seven act-as subjects of one token,
// then seven subjects of one JWT issuer, each begin a session. Before, each subject had a share
// of its own, so they took every slot and the other token's begin was refused. Now each owner
// stops at its share (3 of 6), the refusal names the owner's share and the setting that raises
// it, and the other token still begins.
func TestSubjectsShareTheirOwnersSessionSlots(t *testing.T) {
	t.Parallel()
	f := newQuotaFixture(t)
	other := caller{token: quotaOtherToken}
	for _, owner := range []struct {
		name    string
		subject func(int) caller
	}{{"hub", f.hubSubject}, {"jwt", func(i int) caller { return f.jwtSubject(t, i) }}} {
		ids, refused := f.beginAll(t, owner.subject)
		if len(ids) != 3 || len(refused) != 4 {
			t.Fatalf("%s's 7 subjects opened %d sessions (%d refused), want its share of 3", owner.name, len(ids), len(refused))
		}
		for _, body := range refused {
			msg := fmt.Sprint(body["error"])
			if !strings.Contains(msg, fmt.Sprintf("All 3 sessions of %q", owner.name)) || !strings.Contains(msg, "sessions.max_sessions_per_principal") ||
				!strings.Contains(fmt.Sprint(body["suggestion"]), "max_sessions_per_principal") {
				t.Errorf("%s's refusal does not name its share: %v", owner.name, body)
			}
		}
		status, body := f.post(t, other, "pg_tx", `{"action":"begin","read_only":true}`)
		if status != 200 {
			t.Fatalf("after %s's subjects, the other token's begin: %d %v", owner.name, status, body)
		}
		for i, id := range ids {
			if status, body := f.post(t, owner.subject(i), "pg_tx", fmt.Sprintf(`{"action":"rollback","session_id":%q}`, id)); status != 200 {
				t.Fatalf("rollback: %d %v", status, body)
			}
		}
	}
}

// TestSubjectsShareTheirOwnersTransactionSlots: seven act-as subjects of one token (then of one
// JWT issuer) run pg_transaction at once. At most the owner's share of 3 run, the others are
// refused at once naming the owner's share, and the other token's call, sent while they run,
// gets a slot without waiting (before, the subjects took all 6 and it was refused after
// pool_wait).
func TestSubjectsShareTheirOwnersTransactionSlots(t *testing.T) {
	t.Parallel()
	f := newQuotaFixture(t)
	other := caller{token: quotaOtherToken}
	for _, owner := range []struct {
		name    string
		subject func(int) caller
	}{{"hub", f.hubSubject}, {"jwt", func(i int) caller { return f.jwtSubject(t, i) }}} {
		type outcome struct {
			status int
			body   map[string]any
		}
		out := make(chan outcome, 7)
		var wg sync.WaitGroup
		for i := 0; i < 7; i++ {
			c := owner.subject(i)
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, body := f.post(t, c, "pg_transaction", `{"operations":[{"sql":"select pg_sleep(2)"}]}`)
				out <- outcome{status, body}
			}()
		}
		// Wait until the admitted calls are running, then call as the other token.
		deadline := time.Now().Add(5 * time.Second)
		for f.db.QueryInt(t, `select count(*) from pg_stat_activity where datname = current_database()
			and application_name like 'pgtools/%/pg_transaction' and xact_start is not null`) < 3 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		status, body := f.post(t, other, "pg_transaction", `{"operations":[{"sql":"select 1"}]}`)
		if status != 200 {
			t.Errorf("while %s's subjects run, the other token's pg_transaction: %d %v", owner.name, status, body)
		}
		wg.Wait()
		close(out)
		ran := 0
		for o := range out {
			switch {
			case o.status == 200:
				ran++
			case o.status == 429 && o.body["errorType"] == "rate_limited":
				if msg := fmt.Sprint(o.body["error"]); !strings.Contains(msg, fmt.Sprintf("All 3 pg_transaction calls %q may run at once", owner.name)) ||
					!strings.Contains(msg, "sessions.max_transactions_per_principal") {
					t.Errorf("%s's refusal does not name its share: %v", owner.name, o.body)
				}
			default:
				t.Errorf("a subject's call: %d %v", o.status, o.body)
			}
		}
		if ran > 3 {
			t.Errorf("%s's subjects ran %d pg_transaction calls at once, over its share of 3", owner.name, ran)
		}
	}
}
