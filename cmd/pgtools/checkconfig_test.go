package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pgtools/pgtools/tools/pgtest"
)

func TestCheckConfig(t *testing.T) {
	t.Parallel()
	env := map[string]string{}
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("file-token-secret-0123456789\n"), 0o600)
	pwFile := filepath.Join(dir, "pw")
	os.WriteFile(pwFile, []byte("password-from-file\n"), 0o600)
	cfgFile := filepath.Join(dir, "pgtools.json")
	os.WriteFile(cfgFile, []byte(`{"listen": "0.0.0.0:8080",
	  "tokens": [{"name": "n8n", "token_file": "`+tokenFile+`", "scopes": ["read", "write"], "databases": ["default"]}],
	  "databases": {
	    "default": {"url": "postgres://app@db.internal:5432/app?sslmode=verify-full", "password_file": "`+pwFile+`"},
	    "reports": {"url": "postgres://ro:url-password@reports.internal/reports?sslmode=require", "policy": {"read_only": true}}},
	  "limits": {"rate_per_second": 10, "max_concurrent_per_token": 4}}`), 0o600)
	env["PGTOOLS_TOKENS"] = "env-token-secret-0123456789:read"

	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"check-config", "--config", cfgFile}, &out, &errOut, envOf(env))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, secret := range []string{"file-token-secret", "env-token-secret", "password-from-file", "url-password", "postgres://"} {
		if strings.Contains(out.String()+errOut.String(), secret) {
			t.Errorf("check-config printed %q:\n%s", secret, out.String())
		}
	}
	var eff struct {
		Listen string
		Tokens []struct {
			Name, Token, Source string
			Databases           []string
		}
		Databases map[string]struct {
			URL        string
			Connection struct{ Host, Database, User, TLS, Password string }
			Policy     struct {
				ReadOnly bool `json:"read_only"`
				MaxLimit int  `json:"max_limit"`
			}
		}
		Limits struct {
			RatePerSecond float64 `json:"rate_per_second"`
			Burst         int
		}
	}
	if err := json.Unmarshal(out.Bytes(), &eff); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	def, rep := eff.Databases["default"], eff.Databases["reports"]
	if len(eff.Tokens) != 2 || eff.Tokens[0].Token != "[REDACTED]" || eff.Tokens[1].Source != "env PGTOOLS_TOKENS" ||
		strings.Join(eff.Tokens[1].Databases, ",") != "default,reports" ||
		def.URL != "[REDACTED]" || def.Connection.Host != "db.internal" || def.Connection.User != "app" ||
		!strings.HasPrefix(def.Connection.TLS, "verify-full") || def.Connection.Password != "[REDACTED]" ||
		!strings.HasPrefix(rep.Connection.TLS, "require") || !rep.Policy.ReadOnly || rep.Policy.MaxLimit != 10000 ||
		eff.Limits.RatePerSecond != 10 || eff.Limits.Burst != 10 {
		t.Errorf("effective config:\n%s", out.String())
	}

	// An invalid file: one line per problem, exit 1, nothing on stdout.
	os.WriteFile(cfgFile, []byte(`{"listen": 8080, "tokenz": [], "databases": {"default": {"max_conns": "ten"}}}`), 0o600)
	out.Reset()
	errOut.Reset()
	code = run(context.Background(), []string{"check-config", "--config", cfgFile}, &out, &errOut, envOf(env))
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	if code != 1 || out.Len() != 0 || len(lines) != 5 || !strings.Contains(lines[0], "is invalid (4 problems)") {
		t.Fatalf("invalid file: exit %d, stdout %q, stderr:\n%s", code, out.String(), errOut.String())
	}
	// Environment and flags are checked with the file, with where each setting came from.
	delete(env, "PGTOOLS_TOKENS")
	env["DATABASE_URL"] = "postgres://u:pw@db:5432/app?sslmode=verify-everything"
	errOut.Reset()
	code = run(context.Background(), []string{"check-config", "--listen", "0.0.0.0:8080"}, &out, &errOut, envOf(env))
	for _, want := range []string{`databases.default (env DATABASE_URL): sslmode "verify-everything" is not one of`, "listen: refusing to listen on 0.0.0.0:8080 without API tokens"} {
		if code != 1 || !strings.Contains(errOut.String(), want) {
			t.Errorf("exit %d, stderr lacks %q:\n%s", code, want, errOut.String())
		}
	}
	if strings.Contains(errOut.String(), "pw@") {
		t.Errorf("the DSN's password is shown:\n%s", errOut.String())
	}
}

// TestSecretsFromFilesAndEnv starts serve with the database URL from DATABASE_URL_FILE and tokens
// from PGTOOLS_TOKENS_FILE, the way container secrets are mounted.
func TestSecretsFromFilesAndEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{}
	db := pgtest.New(t)
	db.Exec(t, `CREATE TABLE t (id int); INSERT INTO t VALUES (1)`)
	dir := t.TempDir()
	urlFile := filepath.Join(dir, "url")
	os.WriteFile(urlFile, []byte(db.RoleDSN(t, "secrets")+"\n"), 0o600)
	tokFile := filepath.Join(dir, "tokens")
	os.WriteFile(tokFile, []byte("first-file-token-0123456:read\nsecond-file-token-012345:read,write\n"), 0o600)
	env["DATABASE_URL_FILE"] = urlFile
	env["PGTOOLS_TOKENS_FILE"] = tokFile
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve", "--listen", "127.0.0.1:0"}, &stdout, &stderr, envOf(env)) }()
	addr := waitFor(t, &stderr, regexp.MustCompile(`"listen":"([^"]+)"`))
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"call", "--url", "http://" + addr, "--token", "second-file-token-012345", "select_query", `{"table":"t"}`}, &out, &errOut, envOf(env)); code != 0 {
		t.Fatalf("call with a token from PGTOOLS_TOKENS_FILE: exit %d %s %s", code, out.String(), errOut.String())
	}
	// healthcheck, as a container runs it.
	out.Reset()
	if code := run(context.Background(), []string{"healthcheck", "--addr", addr, "--ready"}, &out, &errOut, envOf(env)); code != 0 || !strings.Contains(out.String(), "/readyz: 200") {
		t.Fatalf("healthcheck --ready: exit %d %s %s", code, out.String(), errOut.String())
	}
	env["PGTOOLS_LISTEN"] = addr
	if code := run(context.Background(), []string{"healthcheck"}, &out, &errOut, envOf(env)); code != 0 {
		t.Fatalf("healthcheck from PGTOOLS_LISTEN: exit %d %s %s", code, out.String(), errOut.String())
	}
	stopRun(t, cancel, done, "serve", &stderr, 15*time.Second)
	if code := run(context.Background(), []string{"healthcheck", "--addr", addr, "--timeout", "2s"}, &out, &errOut, envOf(env)); code != 1 {
		t.Fatalf("healthcheck against a stopped server: exit %d", code)
	}
}

func TestLocalAddr(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{":8080": "127.0.0.1:8080", "0.0.0.0:9": "127.0.0.1:9", "[::]:8080": "127.0.0.1:8080",
		"10.0.0.5:8080": "10.0.0.5:8080", "[::1]:8080": "[::1]:8080"} {
		if got := localAddr(in); got != want {
			t.Errorf("localAddr(%q) = %q, want %q", in, got, want)
		}
	}
}
