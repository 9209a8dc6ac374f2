package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/forward"
	"github.com/pgtools/pgtools/runner/state"
)

// fleet is the forwarding between replicas of one Runtime (runner/forward): nil when the
// config names no peers, no state with a fleet secret, and BuildOptions no Locator, or
// sessions are off.
type fleet struct {
	locator   forward.Locator
	forwarder *forward.Forwarder
	internal  http.Handler // /internal/v1/: the signed endpoints other replicas call
	stop      context.CancelFunc
	// live is the live replicas, this one included, as last counted: a token's rate (read at
	// each call), session share and pg_transaction share are split by it.
	live atomic.Int64
}

// startFleet builds rt's forwarding from cfg.Fleet (or opts.Locator) and starts probing the
// peers. It needs the session manager (the replica's tag) and runs forwarded calls on the
// current generation.
func (rt *Runtime) startFleet(cfg *config.Config, log zerolog.Logger) error {
	registry := rt.state != nil && cfg.Fleet.SecretFile != "" // the state's replica registry finds the peers
	if rt.sessions == nil || !cfg.Fleet.Forwards() && rt.opts.Locator == nil && !registry {
		return nil
	}
	if len(cfg.Fleet.Secret) < forward.SecretMinBytes {
		return fmt.Errorf("fleet.secret_file: forwarding between replicas needs a shared secret of at least %d bytes", forward.SecretMinBytes)
	}
	tag := rt.sessions.Tag()
	signer := forward.NewSigner(cfg.Fleet.Secret, nil)
	client := forward.NewClient(signer, tag)
	f := &fleet{locator: rt.opts.Locator}
	f.live.Store(1)
	ctx, stop := context.WithCancel(context.Background())
	f.stop = stop
	interval := cmp.Or(rt.opts.FleetInterval, forward.DefaultInterval)
	if f.locator == nil && registry && !cfg.Fleet.Forwards() {
		f.locator = registryLocator{rt.state}
	}
	if f.locator == nil {
		peers := forward.NewPeers(forward.PeersOptions{URLs: cfg.Fleet.Peers, DNS: cfg.Fleet.PeersDNS, Scheme: cfg.Fleet.Scheme,
			Interval: interval, Log: log}, tag, client)
		go peers.Run(ctx)
		f.locator = peers
	}
	go rt.shareLimits(ctx, f, interval, log)
	f.forwarder = forward.NewForwarder(f.locator, client, tag, log)
	f.internal = forward.NewHandler(signer, tag, cfg.ReplicaID, rt, log)
	rt.fleet = f
	return nil
}

func (f *fleet) close() {
	if f != nil && f.stop != nil {
		f.stop()
	}
}

// internalHandler is what the main listener serves under /internal/v1/; nil without a fleet.
func (rt *Runtime) internalHandler() http.Handler {
	if rt.fleet == nil {
		return nil
	}
	return rt.fleet.internal
}

// shareLimits counts the live replicas every interval and, when the count changes, splits each
// token's session and pg_transaction shares by it (the rate limiters read f.live at each call).
func (rt *Runtime) shareLimits(ctx context.Context, f *fleet, interval time.Duration, log zerolog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := f.locator.Live(ctx)
		if err != nil || n < 1 {
			continue // keep the last count: the locator is down, not the fleet
		}
		if old := f.live.Swap(int64(n)); old != int64(n) {
			rt.sessions.SetFleetShare(n)
			rt.txLimit.SetFleetShare(n)
			log.Info().Int("live_replicas", n).Int64("before", old).Msg("fleet: limits shared by the live replicas")
		}
	}
}

// fleetSize is the live replica count the rate limiters split by; nil without a fleet.
func (rt *Runtime) fleetSize() *atomic.Int64 {
	if rt.fleet == nil {
		return nil
	}
	return &rt.fleet.live
}

// registryLocator finds the replicas in the state database's registry (runner/state).
type registryLocator struct{ st *state.State }

func (l registryLocator) Owner(ctx context.Context, tag string) (string, bool, error) {
	r, live, err := l.st.Owner(ctx, tag)
	if errors.Is(err, state.ErrNoReplica) {
		return "", false, forward.ErrUnknownTag
	}
	return r.Address, live, err
}

func (l registryLocator) Live(ctx context.Context) (int, error) {
	rs, err := l.st.Replicas(ctx)
	return max(len(rs), 1), err
}
