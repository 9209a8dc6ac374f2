// Package taskbroker joins n8n's task broker as an external task runner of type "pgtools", so
// n8n nodes reach the tools with this.startJob("pgtools", settings, itemIndex) instead of an HTTP
// credential.
//
// A Client serves one broker. It exchanges the broker auth token (n8n's N8N_RUNNERS_AUTH_TOKEN)
// for a single-use grant token (POST <broker>/runners/auth), opens the WebSocket
// <broker>/runners/_ws?id=<runner id> with that grant, registers with runner:info for the one
// task type "pgtools", and keeps non-expiring offers outstanding up to its concurrency limit.
// Each accepted task runs the tool its settings name (see Settings) through Caller.Call as one
// fixed principal and answers runner:taskdone {data: {result}} with the JSON object the HTTP API
// returns, or runner:taskerror {error} with the error object. broker:taskcancel cancels the
// call's context, which cancels the statement on the server; broker:drain stops offering and
// lets the tasks in flight finish. When the broker goes away (n8n restarts; every "n8n execute"
// starts a broker of its own) the client reconnects with capped, jittered exponential backoff and
// a fresh grant token.
//
// The protocol is n8n's internal one, read from n8n 2.41.1 (packages/@n8n/task-runner and
// packages/cli/src/task-runners/task-broker): unversioned, so unknown message types are ignored.
// Neither token is ever logged.
package n8n

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/invoke"
	"github.com/pgtools/pgtools/tools"
)

// Options configure a Client. URL, AuthToken, Caller and Principal are required; zero values
// of the rest take the defaults named in their comments.
type Options struct {
	// URL is the broker's base URL, e.g. http://127.0.0.1:5679 (n8n's N8N_RUNNERS_BROKER_PORT);
	// https gives wss. A path replaces the default "/runners" (n8n's N8N_RUNNERS_PATH). It must
	// not hold credentials, a query or a fragment.
	URL string
	// AuthToken is the broker auth token, n8n's N8N_RUNNERS_AUTH_TOKEN. A secret: never logged.
	AuthToken string
	// Caller runs the tools (a *tools.Registry).
	Caller Caller
	// Principal is who every task runs as: its scopes, databases and the sessions it owns.
	// Whoever holds AuthToken can make the broker send tasks, so this is their principal.
	Principal tools.Principal
	// ActAs, when set, lets tasks name an end user in the "subject" setting (docs/design.md §11); nil
	// refuses such tasks with not_allowed.
	ActAs *auth.ActAs
	// Log receives connection events and one line per task (no argument values).
	Log zerolog.Logger
	// Tracer, when set, traces every task's call (one span, a child of the task's traceparent
	// setting when it has one); nil: no spans.
	Tracer trace.TracerProvider
	// Name is the runner name n8n logs (default "pgtools").
	Name string
	// Concurrency caps the tasks this client runs at once, which is also the number of offers it
	// keeps outstanding (default 10).
	Concurrency int
	// MaxArgsBytes caps a task's args, like the HTTP API's body limit (default
	// config.DefaultMaxBodyBytes, 1 MiB).
	MaxArgsBytes int64
	// MaxMessageBytes caps one message from the broker (default 64 MiB); a larger one ends the
	// connection.
	MaxMessageBytes int64
	// Grace is how long tasks in flight may run on after Run's context ends before they are
	// cancelled (default 10 s).
	Grace time.Duration
	// MinBackoff and MaxBackoff bound the wait between connection attempts (defaults 250 ms and
	// 30 s). The wait doubles per failed attempt, with jitter, and starts over after a connection
	// that registered.
	MinBackoff, MaxBackoff time.Duration
	// PingInterval is how often the client pings the broker (default 15 s); a connection silent
	// for three intervals is considered dead. The broker's own pings are answered regardless.
	PingInterval time.Duration
	// SettingsTimeout is how long an accepted task may wait for its settings before its slot is
	// freed (default 30 s; n8n sends them within its 2 s accept window).
	SettingsTimeout time.Duration
	// TaskTimeout is n8n's task timeout, the N8N_RUNNERS_TASK_TIMEOUT n8n runs with (default
	// DefaultTaskTimeout). A task's call is cancelled a little before it and answered with a
	// timeout that says how to raise it: past it n8n cancels the task itself, and the model reads
	// only n8n's generic error.
	TaskTimeout time.Duration
	// HTTPClient makes the grant-token request (default: a client with a 10 s timeout).
	HTTPClient *http.Client
}

// DefaultTaskTimeout is n8n 3's default N8N_RUNNERS_TASK_TIMEOUT (n8n 2 had 300 s): assuming
// the shorter one keeps calls inside either.
const DefaultTaskTimeout = 60 * time.Second

// Client is one runner connected to one broker. Run it with Run; it is not reusable after Run
// returns. Its methods are safe for concurrent use.
type Client struct {
	opts     Options
	log      zerolog.Logger
	inv      *invoke.Invoker // runs the tasks' calls: panic recovery, log line, encoding
	id       string          // runner id, stable across reconnects
	base     string          // for logs: the broker URL without its path
	authURL  string
	wsURL    string
	dialer   websocket.Dialer
	attempts int // connection attempts since the last registered connection; Run's goroutine only
	// taskTimeout and maxArgs start as Options.TaskTimeout and Options.MaxArgsBytes; a
	// configuration reload changes them (SetTaskTimeout, SetMaxArgsBytes) for the tasks that
	// start after it.
	taskTimeout, maxArgs atomic.Int64
}

// New validates opts and returns a client for one broker. It does not connect: Run does.
func New(opts Options) (*Client, error) {
	if opts.AuthToken == "" {
		return nil, errors.New("the n8n broker auth token is empty: set N8N_RUNNERS_AUTH_TOKEN (the value n8n runs with)")
	}
	if opts.Caller == nil {
		return nil, errors.New("n8n: Options.Caller is nil")
	}
	if opts.Principal.Name == "" {
		return nil, errors.New("n8n: Options.Principal has no name")
	}
	u, err := config.BrokerURL(opts.URL)
	if err != nil {
		return nil, err
	}
	if opts.Name == "" {
		opts.Name = "pgtools"
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 10
	}
	if opts.MaxArgsBytes <= 0 {
		opts.MaxArgsBytes = config.DefaultMaxBodyBytes
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = 64 << 20
	}
	if opts.Grace <= 0 {
		opts.Grace = 10 * time.Second
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 250 * time.Millisecond
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(30*time.Second, opts.MinBackoff)
	}
	if opts.PingInterval <= 0 {
		opts.PingInterval = 15 * time.Second
	}
	if opts.SettingsTimeout <= 0 {
		opts.SettingsTimeout = 30 * time.Second
	}
	if opts.TaskTimeout <= 0 {
		opts.TaskTimeout = DefaultTaskTimeout
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	c := &Client{opts: opts, id: "pgtools-" + newID(), base: u.Scheme + "://" + u.Host}
	c.taskTimeout.Store(int64(opts.TaskTimeout))
	c.maxArgs.Store(opts.MaxArgsBytes)
	c.log = opts.Log.With().Str("component", "n8n-broker").Str("broker", c.base).Str("runner_id", c.id).Logger()
	c.inv = invoke.NewInvoker(opts.Caller, c.log)
	c.inv.SetTracerProvider(opts.Tracer)
	c.authURL = u.String() + "/auth"
	ws := *u
	ws.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	ws.Path += "/_ws"
	ws.RawQuery = url.Values{"id": {c.id}}.Encode()
	c.wsURL = ws.String()
	c.dialer = websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: 10 * time.Second}
	return c, nil
}

// SetTaskTimeout changes n8n's task timeout (Options.TaskTimeout; 0 or less: DefaultTaskTimeout)
// for the tasks that start after it; a task already running keeps the bound it started with.
func (c *Client) SetTaskTimeout(d time.Duration) {
	if d <= 0 {
		d = DefaultTaskTimeout
	}
	c.taskTimeout.Store(int64(d))
}

// SetMaxArgsBytes changes the cap on a task's args (Options.MaxArgsBytes; 0 or less:
// config.DefaultMaxBodyBytes) for the tasks that start after it.
func (c *Client) SetMaxArgsBytes(n int64) {
	if n <= 0 {
		n = config.DefaultMaxBodyBytes
	}
	c.maxArgs.Store(n)
}

// Run connects to the broker and serves tasks until ctx ends, reconnecting whenever the
// connection fails or the broker closes it. When ctx ends it stops taking tasks, lets those in
// flight finish for up to Options.Grace, cancels the rest, and returns once none is running.
// It returns nil then; it never gives up on its own.
func (c *Client) Run(ctx context.Context) error {
	c.log.Info().Int("concurrency", c.opts.Concurrency).Msg("joining n8n task broker")
	var lastErr string
	for {
		registered, err := c.connectOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if registered {
			c.attempts = 0
			lastErr = ""
		}
		c.attempts++
		delay := backoff(c.attempts, c.opts.MinBackoff, c.opts.MaxBackoff)
		// The first failure, and every change of reason, is a warning; the same failure again
		// (a broker that stays down between "n8n execute" runs) is debug, so logs do not flood.
		ev := c.log.Debug()
		if msg := errText(err); msg != lastErr {
			ev = c.log.Warn()
			lastErr = msg
		}
		ev.Err(err).Int("attempt", c.attempts).Dur("retry_in", delay).Msg("n8n task broker unavailable; retrying")
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// backoff is the wait before connection attempt n (1-based): min·2^(n-1), capped at max, of which
// a random half is dropped ("equal jitter"), so many runners restarted together do not reconnect
// in lockstep, and the wait still grows.
func backoff(n int, minD, maxD time.Duration) time.Duration {
	d := maxD
	if n < 32 {
		d = min(minD<<(n-1), maxD)
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// connectOnce gets a grant, connects and serves the connection until it ends. registered
// reports whether the broker accepted the runner, i.e. whether the attempt got anywhere.
func (c *Client) connectOnce(ctx context.Context) (registered bool, err error) {
	grant, err := c.grantToken(ctx)
	if err != nil {
		return false, err
	}
	header := http.Header{"Authorization": {"Bearer " + grant}}
	ws, resp, err := c.dialer.DialContext(ctx, c.wsURL, header)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		if errors.Is(err, websocket.ErrBadHandshake) && resp != nil {
			return false, fmt.Errorf("the broker refused the WebSocket connection (HTTP %d)%s", resp.StatusCode, statusHint(resp.StatusCode, false))
		}
		return false, fmt.Errorf("connecting to the broker's WebSocket: %w", err)
	}
	return c.serve(ctx, ws)
}

// grantToken exchanges the auth token for a single-use grant token.
func (c *Client) grantToken(ctx context.Context) (string, error) {
	body, _ := json.Marshal(map[string]string{"token": c.opts.AuthToken})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.authURL, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("building the grant-token request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		// *url.Error names the URL, which holds no secret (New refuses credentials in it).
		return "", fmt.Errorf("requesting a grant token: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("reading the grant token: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("the broker refused the grant-token request (HTTP %d)%s", resp.StatusCode, statusHint(resp.StatusCode, true))
	}
	var out struct {
		Data struct {
			Token string `json:"token"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.Data.Token == "" {
		return "", errors.New(`the broker's grant-token answer is not {"data":{"token":…}}: is the URL n8n's task broker?`)
	}
	return out.Data.Token, nil
}

// statusHint says what an HTTP status from the broker most likely means.
func statusHint(status int, auth bool) string {
	switch {
	case status == http.StatusForbidden && auth:
		return ": the auth token is wrong; it must equal the N8N_RUNNERS_AUTH_TOKEN n8n runs with"
	case status == http.StatusForbidden || status == http.StatusUnauthorized:
		return ": the grant token was refused (expired or already used)"
	case status == http.StatusNotFound:
		return ": is this n8n's task broker (port 5679 by default, N8N_RUNNERS_BROKER_PORT) with the default path /runners?"
	case status == http.StatusTooManyRequests:
		return ": the broker rate-limits runner connections; retrying later"
	}
	return ""
}
