package config

import (
	"fmt"
	"net"
	"net/url"
)

// FleetSecretMinBytes is the shortest fleet secret accepted (runner/forward.SecretMinBytes).
const FleetSecretMinBytes = 32

// Fleet is the config file's "fleet": how the replicas of one deployment find each other, so
// that any of them forwards a call in a session another holds to that replica (runner/forward,
// docs/scaling.md), and how they authenticate those calls. Unset (no peers, no peers_dns), a
// replica answers another's session with session_not_found naming its tag, as before.
type Fleet struct {
	// AdvertiseURL is the base URL the other replicas reach this one at (http or https, no
	// path), recorded in State's replica registry. Default: http:// and the listen address,
	// with a wildcard host replaced by the host name.
	AdvertiseURL string `json:"advertise_url,omitempty"`
	// Peers are the replicas' base URLs, e.g. http://10.0.0.2:8080; this replica's own may be
	// listed (every replica can share one list). Default none.
	Peers []string `json:"peers,omitempty"`
	// PeersDNS is a name and port whose addresses are the replicas, resolved every 2 s, e.g. a
	// Kubernetes headless Service: pgtools-headless.default.svc.cluster.local:8080. Default "".
	PeersDNS string `json:"peers_dns,omitempty"`
	// Scheme is how PeersDNS's addresses are reached: "http" (default) or "https".
	Scheme string `json:"scheme,omitempty"`
	// SecretFile holds the secret every replica signs and checks its internal requests with
	// (at least 32 bytes, openssl rand -hex 32); required with Peers or PeersDNS. Whoever holds
	// it can run calls as any principal on any replica: keep it like the API tokens.
	SecretFile string `json:"secret_file,omitempty"`
	// Secret is the secret read from SecretFile. Never logged or printed.
	Secret []byte `json:"-"`
}

// Forwards reports whether the replicas forward session calls to each other.
func (f Fleet) Forwards() bool { return len(f.Peers) > 0 || f.PeersDNS != "" }

// problems lists what is wrong with f, each line naming its key.
func (f Fleet) problems() []string {
	var out []string
	for i, p := range f.Peers {
		u, err := url.Parse(p)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			out = append(out, fmt.Sprintf("fleet.peers[%d]: %q is not a replica's base URL; write it as http://host:port", i, p))
		}
	}
	if f.PeersDNS != "" {
		if h, port, err := net.SplitHostPort(f.PeersDNS); err != nil || h == "" || port == "" {
			out = append(out, fmt.Sprintf("fleet.peers_dns: %q is not a name and port; write it as name:port, e.g. pgtools-headless.default.svc.cluster.local:8080", f.PeersDNS))
		}
	}
	if f.Scheme != "" && f.Scheme != "http" && f.Scheme != "https" {
		out = append(out, fmt.Sprintf("fleet.scheme: %q is neither http nor https", f.Scheme))
	}
	if f.Forwards() && f.SecretFile == "" {
		out = append(out, "fleet.secret_file: forwarding between replicas (fleet.peers or fleet.peers_dns) needs a shared secret; give every replica the same file (openssl rand -hex 32)")
	}
	if f.SecretFile != "" && len(f.Secret) > 0 && len(f.Secret) < FleetSecretMinBytes {
		out = append(out, fmt.Sprintf("fleet.secret_file: the secret in %s is %d bytes long; use at least %d (openssl rand -hex 32)", f.SecretFile, len(f.Secret), FleetSecretMinBytes))
	}
	return out
}
