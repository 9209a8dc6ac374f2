package catalog

import (
	"context"
	"time"
)

// How fresh a snapshot is kept. A small catalog reloads in a few milliseconds, so it is read
// again whenever freshness matters (a listing, a miss). A big one (a load over SyncReloadMax:
// about 0.4 s at 50,000 tables) is served from the cache and reloaded in the background once it
// is older than RefreshAfter, so no call waits for a reload it did not ask for; DDL that pgtools
// runs drops the cache at once (Invalidate).
const (
	// SyncReloadMax is the longest load after which a caller still waits for the next one.
	SyncReloadMax = 50 * time.Millisecond
	// refreshFactor times the last load's duration is how old a big catalog may grow before it
	// is reloaded in the background: the reloads then cost at most 1/refreshFactor of one
	// backend's time.
	refreshFactor = 20
	// refreshMin bounds that age from below.
	refreshMin = time.Second
	// staleMax is the age past which even a big catalog is reloaded while the caller waits:
	// background reloads have been failing.
	staleMax = 5 * time.Minute
	// warmRolesMax is how many role views a background reload loads ahead for the new snapshot.
	warmRolesMax = 32
	// backgroundLoadTimeout bounds a background reload.
	backgroundLoadTimeout = 2 * time.Minute
)

// RefreshAfter is the age at which a snapshot whose load took took is reloaded in the
// background: refreshFactor times took, at least a second and at most the TTL (60 seconds).
func (c *Cache) RefreshAfter(took time.Duration) time.Duration {
	return min(max(refreshFactor*took, refreshMin), c.ttlOrDefault())
}

// big reports a snapshot whose reload a caller should not wait for.
func big(s *Snapshot) bool { return s.took > SyncReloadMax }

// Snapshot returns the cached catalog, loading it when absent or older than the TTL (60
// seconds); with refresh it reloads unless the cache is younger than its minimum reload interval.
// A big catalog past its TTL is answered from the cache while a reload runs in the background.
func (c *Cache) Snapshot(ctx context.Context, refresh bool) (*Snapshot, error) {
	snap := c.cur.Load()
	stale := func(s *Snapshot) bool {
		if s == nil {
			return true
		}
		age := time.Since(s.loaded)
		return age > c.ttlOrDefault() || (refresh && age >= c.minReload)
	}
	if !stale(snap) {
		return snap, nil
	}
	if snap != nil && big(snap) && !refresh && time.Since(snap.loaded) < staleMax {
		c.reloadInBackground(snap)
		return snap, nil
	}
	return c.reload(ctx, stale)
}

// Fresh returns the catalog for a listing: reloaded first where that is cheap (as
// Snapshot(ctx, true)), else the cached one, reloaded in the background once older than
// RefreshAfter. So a listing is at most RefreshAfter plus one load behind changes made outside
// pgtools (about 10 s at 50,000 tables), and never waits for a big reload it does not need.
func (c *Cache) Fresh(ctx context.Context) (*Snapshot, error) {
	snap := c.cur.Load()
	if snap == nil || !big(snap) || time.Since(snap.loaded) >= staleMax {
		return c.Snapshot(ctx, true)
	}
	if time.Since(snap.loaded) >= c.RefreshAfter(snap.took) {
		c.reloadInBackground(snap)
	}
	return snap, nil
}

// reload loads the catalog unless, once it holds the reload lock, stale says the cached one
// (which another caller may just have loaded) will do.
func (c *Cache) reload(ctx context.Context, stale func(*Snapshot) bool) (*Snapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if snap := c.cur.Load(); !stale(snap) {
		return snap, nil
	}
	gen := c.gen.Load()
	fresh, err := c.load(ctx)
	if err != nil {
		return nil, err
	}
	c.store(gen, fresh)
	return fresh, nil
}

// store caches fresh unless Invalidate was called since its load began (gen): it may predate the
// change that called it.
func (c *Cache) store(gen uint64, fresh *Snapshot) {
	if c.gen.Load() == gen {
		c.cur.Store(fresh)
	}
}

// reloadInBackground loads the catalog again without a caller waiting, unless a reload is under
// way, and loads the views of the roles that used old before it replaces it, so that they do not
// wait for theirs either.
func (c *Cache) reloadInBackground(old *Snapshot) {
	if !c.reloading.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer c.reloading.Store(false)
		// Not the caller's context: its call ends long before the load does.
		ctx, cancel := context.WithTimeout(context.Background(), backgroundLoadTimeout)
		defer cancel()
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.cur.Load() != old {
			return // reloaded or invalidated meanwhile
		}
		gen := c.gen.Load()
		fresh, err := c.load(ctx)
		if err != nil {
			return // the next call past staleMax loads while it waits, and reports the error
		}
		for _, role := range old.roles.names(warmRolesMax) {
			if _, err := c.ViewFor(ctx, fresh, role); err != nil {
				break
			}
		}
		c.store(gen, fresh)
	}()
}

func (c *Cache) ttlOrDefault() time.Duration {
	if c.ttl <= 0 {
		return 60 * time.Second
	}
	return c.ttl
}
