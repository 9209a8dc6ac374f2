package runner

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/tools"
)

// Reload reads the configuration again with load (which validates it, as at start) and makes it
// the config of new calls, or refuses it and keeps the current one, logging one error line that
// names the problem. It builds a registry and handler from cfg over the pools opened at Build and runs the
// start-up checks on them (BuildOptions.Check); only when all pass does it publish them as the
// next generation, in one atomic step. Calls already running finish under their generation.
//
// What changes: tokens, JWT and OAuth settings, per-token limits, the body cap, structured
// content, openapi_public, each database's policy (but for the settings baked into its pool) and
// custom tools. What needs a restart, and is logged as such and kept: the n8n brokers, database URLs, passwords,
// max_conns and the timeouts and exec mode the pool's connections carry, the listen addresses,
// the replica id, the audit log, session and pg_transaction limits and the session TTL, the
// approval store's ttl_seconds and max_pending, drain and shutdown timings, the log level. Adding or removing a database is refused: the new
// generation could not serve it, and a removed one must not stay reachable.
//
// The approval store is shared too: requests made or approved before a reload keep their state,
// and the new generation's require_approval rules decide which calls need one.
//
// The session manager is shared: an open pg_tx session keeps its connection, role and claims,
// and its next calls pass the new generation's scopes and policy. A session whose token was
// removed has no caller left; it is rolled back when its TTL expires.
func (rt *Runtime) Reload(ctx context.Context, load func() (*config.Config, error)) (err error) {
	rt.reloadMu.Lock()
	defer rt.reloadMu.Unlock()
	defer func() {
		if err != nil {
			rt.metrics.Reloaded(false)
			rt.log.Error().Str("error", err.Error()).Msg("configuration reload refused; the previous configuration stays")
		}
	}()
	cfg, err := load()
	if err != nil {
		return err
	}
	cur := rt.gen.Load()
	if added, removed := diffKeys(rt.opened.Databases, cfg.Databases); len(added)+len(removed) > 0 {
		return fmt.Errorf("databases added (%s) or removed (%s): that needs a restart", describe(added), describe(removed))
	}
	if cfg.Tracer == nil {
		cfg.Tracer = rt.opened.Tracer
	}
	var restart []string
	dbs := make([]*tools.Database, 0, len(cfg.Databases))
	for _, name := range slices.Sorted(maps.Keys(cfg.Databases)) {
		was, now := rt.opened.Databases[name], cfg.Databases[name]
		for _, f := range poolChanges(was, now) {
			restart = append(restart, "databases."+name+"."+f)
		}
		pol := now.Policy
		// The pool's connections carry these as session defaults: keep what they were opened with.
		pol.StatementTimeout, pol.LockTimeout, pol.PreparedStatements = was.Policy.StatementTimeout, was.Policy.LockTimeout, was.Policy.PreparedStatements
		dbs = append(dbs, tools.NewDatabase(name, rt.dbs[name].Pool, pol))
	}
	restart = append(restart, processChanges(rt.opened, cfg)...)
	g, err := rt.newGeneration(ctx, cfg, dbs, cur.n+1)
	if err != nil {
		return err
	}
	g.api = rt.handler(g)
	rt.publish(g)
	rt.metrics.Reloaded(true)
	ev := rt.log.Info().Int64("config_generation", g.n).Int("tokens", len(cfg.Tokens)).Int("custom_tools", len(cfg.CustomTools))
	ev.Msg("configuration reloaded")
	if len(restart) > 0 {
		rt.log.Warn().Strs("settings", restart).Msg("configuration reload: these settings changed but need a restart; the running values stay")
	}
	return nil
}

// changeList collects the names of the settings that changed.
type changeList []string

func (c *changeList) add(changed bool, name string) {
	if changed {
		*c = append(*c, name)
	}
}

// poolChanges names the settings of a database entry that its open pool carries.
func poolChanges(was, now config.DatabaseConfig) []string {
	var out changeList
	add := out.add
	add(was.URL != now.URL, "url")
	add(was.Password != now.Password, "password")
	add(was.MaxConns != now.MaxConns, "max_conns")
	add(was.Policy.StatementTimeout != now.Policy.StatementTimeout, "statement_timeout")
	add(was.Policy.LockTimeout != now.Policy.LockTimeout, "lock_timeout")
	add(was.Policy.PreparesStatements() != now.Policy.PreparesStatements(), "prepared_statements")
	return out
}

// processChanges names the process-wide settings that changed between was and now.
func processChanges(was, now *config.Config) []string {
	var out changeList
	add := out.add
	add(was.Listen != now.Listen, "listen")
	add(was.MetricsListen != now.MetricsListen, "metrics_listen")
	add(was.ReplicaID != now.ReplicaID, "replica_id")
	add(was.AuditLog != now.AuditLog, "audit_log")
	add(was.LogLevel != now.LogLevel, "log_level")
	add(was.ConnLimits() != now.ConnLimits(), "session and pg_transaction limits")
	add(was.Sessions.TTLSeconds != now.Sessions.TTLSeconds, "sessions.ttl_seconds")
	add(was.Approvals != now.Approvals, "approvals")
	add(was.Shutdown.DrainDelay() != now.Shutdown.DrainDelay() || was.Shutdown.Grace() != now.Shutdown.Grace(), "shutdown")
	wn, nn := was.N8N, now.N8N
	add(!slices.Equal(wn.Brokers, nn.Brokers) || wn.Token != nn.Token || wn.Principal != nn.Principal || wn.Role != nn.Role || wn.ActAs != nn.ActAs, "n8n")
	return out
}

func diffKeys(was, now map[string]config.DatabaseConfig) (added, removed []string) {
	for k := range now {
		if _, ok := was[k]; !ok {
			added = append(added, k)
		}
	}
	for k := range was {
		if _, ok := now[k]; !ok {
			removed = append(removed, k)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	return added, removed
}

func describe(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
