package forward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Locator says where the replica holding a session tag listens and how many replicas are live.
// Peers implements it without a database; a registry of replicas kept in a shared state
// database fits it in a few lines (Owner from its Owner, Live from its list of live replicas).
type Locator interface {
	// Owner is the base URL (scheme://host:port) of the replica whose tag is tag and whether it
	// is live. ErrUnknownTag: no replica of the fleet ever had this tag.
	Owner(ctx context.Context, tag string) (addr string, live bool, err error)
	// Live counts the live replicas, this one included (at least 1).
	Live(ctx context.Context) (int, error)
}

// ErrUnknownTag is a Locator's answer for a tag no replica of the fleet had.
var ErrUnknownTag = errors.New("no replica has this tag")

// PeersOptions configure Peers.
type PeersOptions struct {
	// URLs are the replicas' base URLs, e.g. http://10.0.0.2:8080 (this replica's own may be
	// among them: it is recognized by its tag and skipped).
	URLs []string
	// DNS is a name and port, e.g. pgtools-headless.default.svc.cluster.local:8080: every
	// address the name resolves to is a replica, reached with Scheme (a Kubernetes headless
	// Service lists its ready pods).
	DNS string
	// Scheme is DNS's URL scheme (default "http").
	Scheme string
	// Interval is how often every peer is asked its tag, and DNS resolved again (default 2 s). A
	// peer is live while its last answer is at most 3 intervals old.
	Interval time.Duration
	// Resolve looks a name up (default net.DefaultResolver.LookupHost); tests inject one.
	Resolve func(ctx context.Context, host string) ([]string, error)
	// Log receives a line when a peer appears, disappears or two claim one tag.
	Log zerolog.Logger
}

// DefaultInterval is PeersOptions.Interval when unset.
const DefaultInterval = 2 * time.Second

// Peers is a Locator over a configured list of peers and/or a DNS name: it asks each address
// its tag (GET /internal/v1/replica, signed both ways) every Interval. It is safe for
// concurrent use; Run keeps it current.
type Peers struct {
	opts   PeersOptions
	own    string // this replica's tag
	client *Client
	mu     sync.Mutex
	byTag  map[string]*peer
	probed time.Time
}

type peer struct {
	addr     string
	replica  string
	seen     time.Time // the last answer; zero: never answered since it was lost
	conflict string    // another address that claimed the same tag, "" for none
}

// NewPeers returns a Peers for the replica tagged own, asking through c.
func NewPeers(opts PeersOptions, own string, c *Client) *Peers {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Scheme == "" {
		opts.Scheme = "http"
	}
	if opts.Resolve == nil {
		opts.Resolve = net.DefaultResolver.LookupHost
	}
	return &Peers{opts: opts, own: own, client: c, byTag: map[string]*peer{}}
}

// Run probes the peers every Interval until ctx ends; the first probe runs at once.
func (p *Peers) Run(ctx context.Context) {
	t := time.NewTicker(p.opts.Interval)
	defer t.Stop()
	for {
		p.Probe(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// addresses are the base URLs to probe: the configured ones and what DNS gives now.
func (p *Peers) addresses(ctx context.Context) []string {
	out := slices.Clone(p.opts.URLs)
	if p.opts.DNS != "" {
		host, port, err := net.SplitHostPort(p.opts.DNS)
		if err == nil {
			rctx, cancel := context.WithTimeout(ctx, p.opts.Interval)
			ips, err := p.opts.Resolve(rctx, host)
			cancel()
			if err != nil {
				p.opts.Log.Warn().Str("dns", p.opts.DNS).Err(err).Msg("fleet: resolving the peers' name failed")
			}
			for _, ip := range ips {
				out = append(out, p.opts.Scheme+"://"+net.JoinHostPort(ip, port))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Probe asks every peer its tag once and updates who is live.
func (p *Peers) Probe(ctx context.Context) {
	addrs := p.addresses(ctx)
	type answer struct {
		addr string
		id   Identity
		err  error
	}
	answers := make(chan answer, len(addrs))
	for _, a := range addrs {
		go func() {
			pctx, cancel := context.WithTimeout(ctx, p.opts.Interval)
			defer cancel()
			id, err := p.client.Identify(pctx, a)
			answers <- answer{a, id, err}
		}()
	}
	got := make([]answer, 0, len(addrs))
	for range addrs {
		got = append(got, <-answers)
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	claimed := map[string]string{} // tag → address, this round
	for _, an := range got {
		if an.err != nil || an.id.Tag == p.own {
			continue
		}
		if other, dup := claimed[an.id.Tag]; dup {
			// Two live addresses answer to one tag: forwarding to either could reach the wrong
			// sessions, so the tag is not forwarded until only one claims it.
			if pe := p.byTag[an.id.Tag]; pe != nil && pe.conflict == "" {
				p.opts.Log.Error().Str("tag", an.id.Tag).Str("addr", an.addr).Str("other", other).
					Msg("fleet: two replicas claim one session tag; give each its own replica_id")
				pe.conflict = an.addr
			}
			continue
		}
		claimed[an.id.Tag] = an.addr
		pe := p.byTag[an.id.Tag]
		if pe == nil {
			pe = &peer{}
			p.byTag[an.id.Tag] = pe
			p.opts.Log.Info().Str("tag", an.id.Tag).Str("replica", an.id.Replica).Str("addr", an.addr).Msg("fleet: peer found")
		}
		pe.addr, pe.replica, pe.seen, pe.conflict = an.addr, an.id.Replica, now, ""
	}
	p.probed = now
}

// liveAt reports whether pe answered recently enough at now.
func (p *Peers) liveAt(pe *peer, now time.Time) bool {
	return pe.conflict == "" && !pe.seen.IsZero() && now.Sub(pe.seen) <= 3*p.opts.Interval
}

// Owner implements Locator.
func (p *Peers) Owner(_ context.Context, tag string) (string, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pe := p.byTag[tag]
	if pe == nil {
		return "", false, ErrUnknownTag
	}
	return pe.addr, p.liveAt(pe, time.Now()), nil
}

// Name is the replica name a tag's peer last gave, "" when unknown.
func (p *Peers) Name(tag string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pe := p.byTag[tag]; pe != nil {
		return pe.replica
	}
	return ""
}

// Lost marks tag's peer as not live (its address refused a connection), until it answers a
// probe again.
func (p *Peers) Lost(tag string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pe := p.byTag[tag]; pe != nil && !pe.seen.IsZero() {
		pe.seen = time.Time{}
		p.opts.Log.Warn().Str("tag", tag).Str("addr", pe.addr).Msg("fleet: peer refused a connection; its sessions are lost")
	}
}

// Live implements Locator.
func (p *Peers) Live(context.Context) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, now := 1, time.Now()
	for _, pe := range p.byTag {
		if p.liveAt(pe, now) {
			n++
		}
	}
	return n, nil
}

// Identity is what a replica answers on GET /internal/v1/replica.
type Identity struct {
	Tag     string `json:"tag"`
	Replica string `json:"replica"`
}

// Client sends signed requests to other replicas. It is safe for concurrent use.
type Client struct {
	signer *Signer
	own    string
	http   *http.Client
}

// NewClient returns a Client for the replica tagged own.
func NewClient(s *Signer, own string) *Client {
	tr := &http.Transport{
		Proxy:               nil, // replicas reach each other directly
		DialContext:         (&net.Dialer{Timeout: 3 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	return &Client{signer: s, own: own, http: &http.Client{Transport: tr}}
}

// maxAnswerBytes bounds an answer read from a peer: a forwarded result is at most a response
// cap (default 1 MiB) plus its envelope.
const maxAnswerBytes = 64 << 20

// do sends a signed request and returns the verified answer's status and body. A failure to
// connect is a *net.OpError from Dial (dialFailed tells).
func (c *Client) do(ctx context.Context, method, base, path, target string, body []byte) (int, []byte, error) {
	u, err := url.Parse(strings.TrimSuffix(base, "/") + path)
	if err != nil {
		return 0, nil, fmt.Errorf("peer address %q: %w", base, err)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), strings.NewReader(string(body)))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	nonce := c.signer.Sign(req, body, target, c.own)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return 0, nil, err
	}
	if err := c.signer.VerifyAnswer(resp.Header, nonce, resp.StatusCode, raw); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("answer of %s: %w", base, err)
	}
	return resp.StatusCode, raw, nil
}

// Identify asks the replica at base its tag.
func (c *Client) Identify(ctx context.Context, base string) (Identity, error) {
	status, raw, err := c.do(ctx, http.MethodGet, base, PathReplica, "*", nil)
	if err != nil {
		return Identity{}, err
	}
	var id Identity
	if status != http.StatusOK || json.Unmarshal(raw, &id) != nil || id.Tag == "" {
		return Identity{}, fmt.Errorf("replica at %s answered %d", base, status)
	}
	return id, nil
}

// dialFailed reports whether err says the connection was never made, so the request was not
// sent.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
