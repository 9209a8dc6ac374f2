package config

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pgtools/pgtools/runner/apitest"
)

// TestPageTokensConfig: page_tokens.key_file is read at load (a short key is refused, naming the
// file and the fix), ttl_seconds defaults to 15 minutes, and check-config's effective config
// says where the key comes from without ever showing it.
func TestPageTokensConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const key = "page-key-0123456789abcdef0123456789abcdef"
	keyFile := apitest.WriteFile(t, dir, "page.key", key+"\n")
	short := apitest.WriteFile(t, dir, "short.key", "too-short\n")
	db := `"databases":{"default":{"url":"postgres://u@127.0.0.1/db"}}`

	cfg, err := LoadConfigFile(apitest.WriteFile(t, dir, "good.json", `{`+db+`,"page_tokens":{"key_file":"`+keyFile+`","ttl_seconds":60}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if string(cfg.PageTokens.Key) != key || cfg.PageTokens.TTL() != time.Minute || cfg.PageTokensNote() != "" {
		t.Fatalf("page_tokens = %+v", cfg.PageTokens)
	}
	out, err := cfg.EffectiveJSON()
	if err != nil {
		t.Fatal(err)
	}
	var eff struct {
		PageTokens map[string]any `json:"page_tokens"`
	}
	if err := json.Unmarshal(out, &eff); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), key) || eff.PageTokens["key"] != redacted || eff.PageTokens["key_file"] != keyFile {
		t.Fatalf("effective page_tokens: %v", eff.PageTokens)
	}

	_, err = LoadConfigFile(apitest.WriteFile(t, dir, "short.json", `{`+db+`,"page_tokens":{"key_file":"`+short+`"}}`))
	if err == nil || !strings.Contains(err.Error(), "page_tokens.key_file") || !strings.Contains(err.Error(), "openssl rand") || strings.Contains(err.Error(), "too-short") {
		t.Fatalf("a 9-byte key: %v", err)
	}

	cfg, err = LoadConfigFile(apitest.WriteFile(t, dir, "none.json", `{`+db+`}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.PageTokens.TTL() != 15*time.Minute || len(cfg.PageTokens.Key) != 0 || !strings.Contains(cfg.PageTokensNote(), "key_file") {
		t.Fatalf("defaults: %+v, note %q", cfg.PageTokens, cfg.PageTokensNote())
	}
	if out, err = cfg.EffectiveJSON(); err != nil || !strings.Contains(string(out), "made at start") {
		t.Fatalf("effective config without key_file does not say the key is made at start: %v\n%s", err, out)
	}
}
