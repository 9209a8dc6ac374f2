package runner

import (
	"context"
	"fmt"
	"net/http"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/forward"
)

// fleet is the forwarding between replicas of one Runtime (runner/forward): nil when the
// config names no peers and BuildOptions no Locator, or sessions are off.
type fleet struct {
	locator   forward.Locator
	forwarder *forward.Forwarder
	internal  http.Handler // /internal/v1/: the signed endpoints other replicas call
	stop      context.CancelFunc
}

// startFleet builds rt's forwarding from cfg.Fleet (or opts.Locator) and starts probing the
// peers. It needs the session manager (the replica's tag) and runs forwarded calls on the
// current generation.
func (rt *Runtime) startFleet(cfg *config.Config, log zerolog.Logger) error {
	if rt.sessions == nil || !cfg.Fleet.Forwards() && rt.opts.Locator == nil {
		return nil
	}
	if len(cfg.Fleet.Secret) < forward.SecretMinBytes {
		return fmt.Errorf("fleet.secret_file: forwarding between replicas needs a shared secret of at least %d bytes", forward.SecretMinBytes)
	}
	tag := rt.sessions.Tag()
	signer := forward.NewSigner(cfg.Fleet.Secret, nil)
	client := forward.NewClient(signer, tag)
	f := &fleet{locator: rt.opts.Locator}
	if f.locator == nil {
		peers := forward.NewPeers(forward.PeersOptions{URLs: cfg.Fleet.Peers, DNS: cfg.Fleet.PeersDNS, Scheme: cfg.Fleet.Scheme,
			Interval: rt.opts.FleetInterval, Log: log}, tag, client)
		ctx, stop := context.WithCancel(context.Background())
		f.stop = stop
		go peers.Run(ctx)
		f.locator = peers
	}
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
