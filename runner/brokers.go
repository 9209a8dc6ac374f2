package runner

import (
	"context"
	"sync"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/invoke"
	"github.com/pgtools/pgtools/runner/n8n"
)

// brokers are the n8n task brokers a Runtime joined as their external task runner
// (config.N8NConfig): one client per broker, each running until the runtime drains or closes.
// The zero value (and nil) joins none. Its methods are safe for concurrent use.
type brokers struct {
	clients []*n8n.Client
	cancel  context.CancelFunc
	done    sync.WaitGroup
}

// joinBrokers starts one client per broker of cfg.N8N, calling caller as the broker principal.
// Each reconnects on its own until drain or stop.
func joinBrokers(cfg *config.Config, caller invoke.Caller, log zerolog.Logger) (*brokers, error) {
	b := &brokers{}
	n := cfg.N8N
	if !n.Joins() {
		return b, nil
	}
	var actAs *auth.ActAs
	if n.ActAs {
		actAs = &auth.ActAs{}
	}
	for _, u := range n.Brokers {
		c, err := n8n.New(n8n.Options{URL: u, AuthToken: n.Token, Caller: caller, Principal: n.TaskPrincipal(), ActAs: actAs,
			Log: log, MaxArgsBytes: cfg.Limits.MaxBodyBytes, Grace: config.DefaultShutdownGrace, Tracer: cfg.Tracer,
			TaskTimeout: n.TaskTimeout()})
		if err != nil {
			return nil, err
		}
		b.clients = append(b.clients, c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	for _, c := range b.clients {
		b.done.Add(1)
		go func() {
			defer b.done.Done()
			_ = c.Run(ctx) // it retries until ctx ends, lets its tasks finish, and returns nil
		}()
	}
	return b, nil
}

// apply gives the clients the settings of cfg they take live: n8n.task_timeout_ms and
// limits.max_body_bytes, for the tasks that start after it.
func (b *brokers) apply(cfg *config.Config) {
	if b == nil {
		return
	}
	for _, c := range b.clients {
		c.SetTaskTimeout(cfg.N8N.TaskTimeout())
		c.SetMaxArgsBytes(cfg.Limits.MaxBodyBytes)
	}
}

// drain makes every client stop taking tasks; each lets its tasks in flight finish for up to
// its grace, then cancels them. It does not wait: stop does.
func (b *brokers) drain() {
	if b != nil && b.cancel != nil {
		b.cancel()
	}
}

// stop drains the clients and returns once every one has stopped.
func (b *brokers) stop() {
	if b == nil {
		return
	}
	b.drain()
	b.done.Wait()
}
