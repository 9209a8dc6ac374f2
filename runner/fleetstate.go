package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/runner/state"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/session"
)

// stateMaxConns bounds the state database pool: approvals, heartbeats and registry lookups are
// short single statements.
const stateMaxConns = 4

// StatePool opens a pool of cfg.State's database for the fleet state: its own, small, without
// the database's tool policy (a read_only policy must not stop pgtools' own writes).
func StatePool(ctx context.Context, cfg *config.Config) (*pgxpool.Pool, error) {
	d := cfg.Databases[cfg.State]
	pcfg, err := pgxpool.ParseConfig(d.URL)
	if err != nil {
		return nil, fmt.Errorf("state database %q: %w", cfg.State, err)
	}
	if d.Password != "" {
		pcfg.ConnConfig.Password = d.Password
	}
	pcfg.MaxConns = stateMaxConns
	if pcfg.ConnConfig.ConnectTimeout == 0 || pcfg.ConnConfig.ConnectTimeout > 5*time.Second {
		pcfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	if pcfg.ConnConfig.RuntimeParams == nil {
		pcfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	pcfg.ConnConfig.RuntimeParams["application_name"] = "pgtools-state"
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("state database %q: creating the pool failed", cfg.State)
	}
	return pool, nil
}

// openState opens cfg.State's schema, registers this replica and starts its heartbeat.
func (rt *Runtime) openState(ctx context.Context, cfg *config.Config) error {
	pool, err := StatePool(ctx, cfg)
	if err != nil {
		return err
	}
	st, err := state.Open(ctx, pool, cfg.StateSchema)
	if err != nil {
		pool.Close()
		return fmt.Errorf("state (database %q): %w", cfg.State, err)
	}
	tag := ""
	if rt.sessions != nil {
		tag = rt.sessions.Tag()
	} else if cfg.ReplicaID != "" {
		tag = session.ReplicaTag(cfg.ReplicaID)
	}
	id := cfg.ReplicaID
	if id == "" {
		id = tag
	}
	beatCtx, stop := context.WithCancel(context.Background())
	registered := false
	if tag != "" {
		if err := st.Register(ctx, state.Replica{ID: id, Tag: tag, Address: AdvertiseURL(cfg)}); err != nil {
			stop()
			pool.Close()
			return fmt.Errorf("state (database %q): %w", cfg.State, err)
		}
		registered = true
		go st.Run(beatCtx, func(err error) { rt.log.Warn().Err(err).Msg("replica heartbeat: the state database did not answer") })
	}
	rt.state = st
	rt.closeState = func() {
		stop()
		if registered {
			dctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			if err := st.Deregister(dctx); err != nil {
				rt.log.Warn().Err(err).Msg("deregistering the replica failed; the others see it dead once its heartbeat ages")
			}
			cancel()
		}
		pool.Close()
	}
	rt.log.Info().Str("state", cfg.State).Str("schema", cfg.StateSchema).Str("replica", id).Str("tag", tag).Str("advertise_url", AdvertiseURL(cfg)).
		Msg("fleet state in PostgreSQL: approvals are shared by the replicas and survive restarts")
	return nil
}

// AdvertiseURL is the base URL other replicas reach this one at: fleet.advertise_url, else
// http:// and the listen address with a wildcard host replaced by the host name.
func AdvertiseURL(cfg *config.Config) string {
	if cfg.Fleet.AdvertiseURL != "" {
		return cfg.Fleet.AdvertiseURL
	}
	host, port, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return "http://" + cfg.Listen
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}

// stateSignIns keeps the /approvals page's sign-ins in the state database, the principal as
// JSON (names, scopes, claims: never a token's secret).
type stateSignIns struct{ st *state.State }

func (s stateSignIns) Put(ctx context.Context, key [32]byte, in httpapi.SignIn, _ time.Time) error { // ended by the database's clock
	p, err := json.Marshal(signInRecord{Principal: in.Principal, Auth: in.Auth})
	if err != nil {
		return err
	}
	return s.st.PutSignIn(ctx, key, state.SignIn{Principal: p, CSRF: in.CSRF, Expires: in.Expires})
}

func (s stateSignIns) Get(ctx context.Context, key [32]byte, _ time.Time) (httpapi.SignIn, bool, error) {
	in, ok, err := s.st.GetSignIn(ctx, key) // ended by the database's clock
	if err != nil || !ok {
		return httpapi.SignIn{}, false, err
	}
	var rec signInRecord
	if err := json.Unmarshal(in.Principal, &rec); err != nil {
		return httpapi.SignIn{}, false, fmt.Errorf("a stored sign-in: %w", err)
	}
	return httpapi.SignIn{Principal: rec.Principal, CSRF: in.CSRF, Expires: in.Expires, Auth: rec.Auth}, true, nil
}

func (s stateSignIns) Delete(ctx context.Context, key [32]byte) error {
	return s.st.DeleteSignIn(ctx, key)
}

func (s stateSignIns) SetFlash(ctx context.Context, key [32]byte, msg string, isErr bool) error {
	return s.st.SetFlash(ctx, key, msg, isErr)
}

func (s stateSignIns) TakeFlash(ctx context.Context, key [32]byte) (string, bool, error) {
	return s.st.TakeFlash(ctx, key)
}

// signInRecord is what the state keeps of a sign-in's principal.
type signInRecord struct {
	Principal tools.Principal `json:"principal"`
	Auth      string          `json:"auth"`
}
