package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/invoke"
	"github.com/pgtools/pgtools/runner/n8n"
	"github.com/pgtools/pgtools/tools"
)

// brokerFlags are serve's settings for joining n8n task brokers as an external task runner.
type brokerFlags struct {
	urls      multiFlag
	tokenFile string
	principal string
	role      string                  // PostgreSQL role of the broker's tasks ("": the login role)
	actAs     bool                    // tasks may name an end user in the subject setting
	getenv    func(key string) string // the environment (os.Getenv in main)
}

func (f *brokerFlags) register(fs *flag.FlagSet, getenv func(string) string) {
	f.getenv = getenv
	fs.Var(&f.urls, "n8n-broker", "n8n task broker to join as an external task runner of type pgtools, e.g. http://127.0.0.1:5679 (repeatable: one per n8n process); env PGTOOLS_N8N_BROKERS=\"url1,url2\"")
	fs.StringVar(&f.tokenFile, "n8n-broker-token-file", "", "file holding the brokers' auth token, the N8N_RUNNERS_AUTH_TOKEN n8n runs with (default: env N8N_RUNNERS_AUTH_TOKEN)")
	fs.StringVar(&f.principal, "n8n-principal", "", "principal that broker tasks run as, with scopes read,write; it owns the sessions they open (default: the config file's n8n.principal, or n8n-broker)")
	fs.StringVar(&f.role, "n8n-role", "", "PostgreSQL role broker tasks run as (SET LOCAL ROLE; checked at start like a token's role); default: the config file's n8n.role, or the login role")
	fs.BoolVar(&f.actAs, "n8n-act-as", false, "let broker tasks name an end user in the \"subject\" setting (the node's \"Act as user\" field): they run as <n8n-principal>:<subject> with request.jwt.claims {\"sub\", \"via\"}")
}

// brokerConfig is where and as whom serve joins n8n task brokers. Without URLs it joins none.
type brokerConfig struct {
	urls      []string
	token     string // a secret: never logged
	principal tools.Principal
	actAs     *auth.ActAs   // nil: tasks may not name a subject
	timeout   time.Duration // n8n's task timeout (0: n8n.DefaultTaskTimeout)
}

// config merges flags, environment and the config file's n8n object (flags win, then the
// environment) and validates them. The API tokens of cfg name principals the broker principal
// must not take: it would share their sessions.
func (f *brokerFlags) config(cfg *config.Config) (brokerConfig, error) {
	file := cfg.N8N
	urls := []string(f.urls)
	if len(urls) == 0 {
		for _, u := range strings.Split(f.getenv("PGTOOLS_N8N_BROKERS"), ",") {
			if u = strings.TrimSpace(u); u != "" {
				urls = append(urls, u)
			}
		}
	}
	if len(urls) == 0 {
		urls = file.Brokers
	}
	if len(urls) == 0 {
		return brokerConfig{}, nil
	}
	for i, u := range urls {
		if err := n8n.ValidateURL(u); err != nil {
			return brokerConfig{}, err
		}
		if slices.Contains(urls[:i], u) {
			return brokerConfig{}, fmt.Errorf("n8n broker %s is listed twice", u)
		}
	}
	token := cmp.Or(f.getenv("N8N_RUNNERS_AUTH_TOKEN"), file.Token)
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return brokerConfig{}, fmt.Errorf("--n8n-broker-token-file: cannot read %s: %w", f.tokenFile, errors.Unwrap(err))
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		return brokerConfig{}, errors.New("joining n8n brokers needs the brokers' auth token: set N8N_RUNNERS_AUTH_TOKEN to the value n8n runs with, pass --n8n-broker-token-file, or set n8n.token_file in the config file")
	}
	principal := cmp.Or(f.principal, file.Principal, config.DefaultN8NPrincipal)
	for _, t := range cfg.Tokens {
		if t.Name == principal {
			return brokerConfig{}, fmt.Errorf("the n8n principal %q (--n8n-principal or n8n.principal) is also an API token's name, so the two would share sessions; choose another name", principal)
		}
	}
	bc := brokerConfig{urls: urls, token: token,
		principal: tools.Principal{Name: principal, Scopes: []string{"read", "write"}, Role: cmp.Or(f.role, file.Role)},
		timeout:   time.Duration(file.TaskTimeoutMS) * time.Millisecond}
	if f.actAs || file.ActAs {
		bc.actAs = &auth.ActAs{}
	}
	return bc, nil
}

// startBrokers runs one task-broker client per URL beside the HTTP API until ctx ends. stop
// ends them and returns once all have stopped; each lets its tasks in flight finish for up to
// grace, then cancels them. Call stop before the registry closes.
func startBrokers(ctx context.Context, bc brokerConfig, caller invoke.Caller, maxArgs int64, grace time.Duration, tracer trace.TracerProvider, log zerolog.Logger) (stop func(), err error) {
	var clients []*n8n.Client
	for _, u := range bc.urls {
		c, err := n8n.New(n8n.Options{URL: u, AuthToken: bc.token, Caller: caller, Principal: bc.principal, ActAs: bc.actAs,
			Log: log, MaxArgsBytes: maxArgs, Grace: grace, Tracer: tracer, TaskTimeout: bc.timeout})
		if err != nil {
			return nil, err
		}
		clients = append(clients, c)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.Run(ctx) // it retries until ctx ends and then returns nil
		}()
	}
	return func() {
		cancel()
		wg.Wait()
	}, nil
}
