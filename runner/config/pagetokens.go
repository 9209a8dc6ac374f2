package config

import (
	"time"

	"github.com/pgtools/pgtools/tools/page"
)

// PageTokens is the config file's "page_tokens": how select_query's next_page tokens are signed
// and how long they stay valid.
type PageTokens struct {
	// KeyFile holds the signing key (at least page.KeyMinBytes bytes), read into Key at
	// load. Replicas that continue each other's pages share it. "" (the default): the runtime
	// makes a random key at start, valid on that runner only.
	KeyFile string `json:"key_file,omitempty"`
	// Key is the signing key read from KeyFile. A secret: never logged or printed.
	Key []byte `json:"-"`
	// TTLSeconds is how long a token stays valid, in seconds (default 900).
	TTLSeconds float64 `json:"ttl_seconds"`
}

// DefaultPageTokenTTL is PageTokens.TTLSeconds when unset.
const DefaultPageTokenTTL = page.TTLDefault

// TTL is TTLSeconds as a duration.
func (p PageTokens) TTL() time.Duration { return seconds(p.TTLSeconds) }

// PageTokensNote is what serve logs at start when no key_file is set (check-config shows it as
// page_tokens.key in the effective config): without one, a
// page token made by one replica is refused by the others and after a restart.
func (c *Config) PageTokensNote() string {
	if c.PageTokens.KeyFile != "" {
		return ""
	}
	return "page_tokens.key_file is not set: select_query's next_page tokens are signed with a key made at start, so only this runner continues them, until it restarts; give every replica the same page_tokens.key_file (openssl rand -hex 32)"
}
