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
// names the problem. It builds a registry and handler from cfg over the pools opened at Build and
// runs the start-up checks on them (BuildOptions.Check); only when all pass does it publish them
// as the next generation, in one atomic step. Calls already running finish under their
// generation.
//
// Every setting is compared (config.Changes) and decided by reloadTable: a changed setting that
// applies live is logged as applied ("configuration reloaded", "applied"); one that needs a
// restart keeps its running value and is logged as such, and the number of loaded settings that
// differ from the running ones is the metric pgtools_config_restart_pending (PendingRestart
// lists them). Adding or removing a database is refused: the new generation could not serve it,
// and a removed one must not stay reachable.
//
// The approval store is shared: requests made or approved before a reload keep their state,
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
	applied, restart, err := rt.decide(cur.cfg, cfg)
	if err != nil {
		return err
	}
	// The brokers keep running as they joined: the checks see their principal and role as they
	// are, and only the task timeout follows the new configuration.
	n8nCfg := rt.opened.N8N
	n8nCfg.TaskTimeoutMS = cfg.N8N.TaskTimeoutMS
	cfg.N8N = n8nCfg
	dbs := make([]*tools.Database, 0, len(cfg.Databases))
	for _, name := range slices.Sorted(maps.Keys(cfg.Databases)) {
		dbs = append(dbs, tools.NewDatabase(name, rt.dbs[name].Pool, poolPolicy(rt.opened.Databases[name].Policy, cfg.Databases[name].Policy)))
	}
	g, err := rt.newGeneration(ctx, cfg, dbs, cur.n+1)
	if err != nil {
		return err
	}
	g.api = rt.handler(g)
	rt.publish(g)
	rt.brokers.apply(cfg)
	rt.pending.Store(&restart)
	rt.metrics.Reloaded(true)
	rt.metrics.SetRestartPending(len(restart))
	rt.log.Info().Int64("config_generation", g.n).Int("tokens", len(cfg.Tokens)).Int("custom_tools", len(cfg.CustomTools)).
		Strs("applied", applied).Msg("configuration reloaded")
	if len(restart) > 0 {
		rt.log.Warn().Strs("settings", restart).Msg("configuration reload: these settings changed but need a restart; the running values stay")
	}
	return nil
}

// decide compares every setting of now with the current generation's (cur) and with the ones
// running since Build, and sorts the changes by reloadTable: applied are the paths of changed
// settings the reload applies, restart those whose loaded value differs from the running one and
// needs a restart to take effect (a key the table lacks among them).
func (rt *Runtime) decide(cur, now *config.Config) (applied, restart []string, err error) {
	since, err := config.Changes(cur, now)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range since {
		if reloadTable[c.Key] == appliesLive {
			applied = append(applied, c.Path)
		}
	}
	running, err := config.Changes(rt.opened, now)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range running {
		if reloadTable[c.Key] != appliesLive {
			restart = append(restart, c.Path)
		}
	}
	return applied, restart, nil
}

// PendingRestart lists the settings whose value in the configuration last loaded differs from
// the running one because a change of them needs a restart (reloadTable), by path, e.g.
// "databases.main.max_conns"; none at Build.
func (rt *Runtime) PendingRestart() []string {
	if p := rt.pending.Load(); p != nil {
		return slices.Clone(*p)
	}
	return nil
}

// poolPolicy is now with the settings an open pool's connections carry as session defaults
// (tools.PoolConfig: statement_timeout, lock_timeout, the exec mode) kept as the pool was opened
// with them (was): a reload cannot change them, and a policy that said otherwise would mislead.
func poolPolicy(was, now tools.Policy) tools.Policy {
	now.StatementTimeout, now.LockTimeout, now.PreparedStatements = was.StatementTimeout, was.LockTimeout, was.PreparedStatements
	return now
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
