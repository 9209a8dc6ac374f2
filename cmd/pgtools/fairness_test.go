package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestCheckConfigSharedRoleNoteAndShares: check-config notes a database entry that tokens with
// different scopes share, and shows the per-principal shares serve will use — half of each limit
// for two tokens, all of it for a single token, half again when an n8n broker joins.
func TestCheckConfigSharedRoleNoteAndShares(t *testing.T) {
	t.Parallel()
	env := map[string]string{}
	env["DATABASE_URL"] = "postgres://app@db.internal/app"
	shares := func(args ...string) (stdout, stderr string, sessions map[string]int) {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(context.Background(), append([]string{"check-config"}, args...), &out, &errOut, envOf(env)); code != 0 {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
		var eff struct{ Sessions map[string]int }
		if err := json.Unmarshal(out.Bytes(), &eff); err != nil {
			t.Fatal(err)
		}
		return out.String(), errOut.String(), eff.Sessions
	}
	_, stderr, s := shares("--token", "reader-secret-0123456789:read", "--token", "writer-secret-0123456789:read,write")
	if !strings.Contains(stderr, "note: databases.default: tokens with different scopes share it") || !strings.Contains(stderr, "pg_terminate_backend") ||
		strings.Contains(stderr, "secret-0123456789") {
		t.Errorf("no note (or a secret) for tokens sharing the default database's role:\n%s", stderr)
	}
	if s["max_sessions_per_principal"] != 5 || s["max_transactions_per_principal"] != 5 {
		t.Errorf("two tokens: %v", s)
	}
	_, stderr, s = shares("--token", "reader-secret-0123456789:read")
	if strings.Contains(stderr, "note:") || s["max_sessions_per_principal"] != 10 || s["max_transactions_per_principal"] != 10 {
		t.Errorf("a single token: %v\n%s", s, stderr)
	}
	// check-config checks the brokers' settings as serve would: joining needs the auth token.
	env["PGTOOLS_N8N_BROKERS"], env["N8N_RUNNERS_AUTH_TOKEN"] = "http://127.0.0.1:5679", "n8n-runners-auth-token-0123456789"
	if _, _, s = shares("--token", "reader-secret-0123456789:read"); s["max_sessions_per_principal"] != 5 {
		t.Errorf("a token beside the n8n broker: %v", s)
	}
}

// TestServeWarnsAboutSharedRole: serve logs the same note as a warning at startup. The database
// need not be up: pools connect on first use.
func TestServeWarnsAboutSharedRole(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--database-url", "postgres://app@127.0.0.1:1/app?sslmode=disable", "--listen", "127.0.0.1:0",
			"--token", "reader-secret-0123456789:read", "--token", "writer-secret-0123456789:read,write"}, &stdout, &stderr, envOf(nil))
	}()
	waitFor(t, &stderr, regexp.MustCompile(`"level":"warn"[^\n]*(tokens with different scopes share it)`))
	waitFor(t, &stderr, regexp.MustCompile(`"listen":"([^"]+)"`))
	stopRun(t, cancel, done, "serve", &stderr, 15*time.Second)
}
