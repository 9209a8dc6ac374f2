package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckConfigNoSecretsExamples: every config file in examples/ validates with --no-secrets
// where its secret and CA files are not mounted, says which files it did not read, and leaks no
// placeholder path; without the flag the missing files are errors. A file that names no secret
// files (custom-tools.json: its secrets come from the environment) is valid either way.
func TestCheckConfigNoSecretsExamples(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(examplesDir, "config", "*.json"))
	if err != nil || len(files) < 2 {
		t.Fatalf("example configs: %v %v", files, err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			var out, errOut bytes.Buffer
			raw, _ := os.ReadFile(file)
			if !strings.Contains(string(raw), "/run/secrets/") {
				if code := run(context.Background(), []string{"check-config", "--config", file}, &out, &errOut, envOf(nil)); code != 0 {
					t.Errorf("without --no-secrets: exit %d, want 0 for a file that names no secret files:\n%s", code, errOut.String())
				}
			} else if _, err := os.Stat("/run/secrets"); err != nil {
				if code := run(context.Background(), []string{"check-config", "--config", file}, &out, &errOut, envOf(nil)); code != 1 || !strings.Contains(errOut.String(), "/run/secrets/") {
					t.Errorf("without --no-secrets: exit %d, want 1 naming the missing secret files:\n%s", code, errOut.String())
				}
			}
			out.Reset()
			errOut.Reset()
			code := run(context.Background(), []string{"check-config", "--no-secrets", "--config", file}, &out, &errOut, envOf(nil))
			if code != 0 {
				t.Fatalf("--no-secrets: exit %d:\n%s", code, errOut.String())
			}
			var eff struct {
				ConfigFile string `json:"config_file"`
				Databases  map[string]struct {
					Connection struct {
						RootCert string `json:"sslrootcert"`
					}
				}
			}
			if err := json.Unmarshal(out.Bytes(), &eff); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, out.String())
			}
			if eff.ConfigFile != file {
				t.Errorf("config_file %q, want %q", eff.ConfigFile, file)
			}
			for _, m := range tlsFileSetting.FindAllStringSubmatch(string(raw), -1) {
				if !strings.Contains(errOut.String(), "not read: databases.") || !strings.Contains(errOut.String(), m[1]+" "+m[2]) {
					t.Errorf("stderr does not say %s %s was not read:\n%s", m[1], m[2], errOut.String())
				}
				if !strings.Contains(out.String(), m[2]) {
					t.Errorf("the effective config does not show %s as %s:\n%s", m[1], m[2], out.String())
				}
			}
			for _, key := range []string{"token_file", "password_file", "url_file"} {
				if strings.Contains(string(raw), `"`+key+`"`) && !strings.Contains(errOut.String(), key+" /") {
					t.Errorf("stderr does not list the %s it did not read:\n%s", key, errOut.String())
				}
			}
			if strings.Contains(out.String()+errOut.String(), "placeholder-") || strings.Contains(out.String()+errOut.String(), "pgtools-check-config-") {
				t.Errorf("a placeholder leaked into the output:\n%s\n%s", out.String(), errOut.String())
			}
		})
	}
}

// TestCheckConfigNoSecretsStillChecks: placeholders stand in for files only; every other problem
// is still reported, against the original file's name, and TLS client files are accepted.
func TestCheckConfigNoSecretsStillChecks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"listen":"0.0.0.0:8080",
	  "tokens":[{"name":"a","token_file":"/nonexistent/a","scopes":["read","write"]},{"name":"b","token_file":"/nonexistent/b","scopes":["read"]}],
	  "databases":{"default":{"url":"postgres://app@db:5432/app?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem&sslcert=/nonexistent/c.pem&sslkey=/nonexistent/c.key",
	    "password_file":"/nonexistent/pw"}}}`), 0o600)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"check-config", "--no-secrets", "--config", good}, &out, &errOut, envOf(nil)); code != 0 {
		t.Fatalf("exit %d:\n%s", code, errOut.String())
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"listen":"0.0.0.0:8080","tokenz":[],
	  "tokens":[{"name":"a","token_file":"/nonexistent/a","scopes":["read"]}],
	  "databases":{"default":{"url":"postgres://app@db/app?sslmode=verify-everything","password_file":"/nonexistent/pw",
	    "policy":{"default_limit":500,"max_limit":100}}}}`), 0o600)
	out.Reset()
	errOut.Reset()
	code := run(context.Background(), []string{"check-config", "--no-secrets", "--config", bad}, &out, &errOut, envOf(nil))
	if code != 1 || !strings.Contains(errOut.String(), "tokenz") || !strings.Contains(errOut.String(), bad) {
		t.Fatalf("unknown key: exit %d, want 1 naming tokenz and %s:\n%s", code, bad, errOut.String())
	}
	os.WriteFile(bad, []byte(`{"tokens":[{"name":"a","token_file":"/nonexistent/a","scopes":["read"]}],
	  "databases":{"default":{"url":"postgres://app@db/app?sslmode=verify-everything","password_file":"/nonexistent/pw",
	    "policy":{"default_limit":500,"max_limit":100}}}}`), 0o600)
	errOut.Reset()
	code = run(context.Background(), []string{"check-config", "--no-secrets", "--config", bad}, &out, &errOut, envOf(nil))
	for _, want := range []string{"verify-everything", "default_limit 500 is above max_limit 100", bad} {
		if code != 1 || !strings.Contains(errOut.String(), want) {
			t.Errorf("exit %d, want 1 with %q:\n%s", code, want, errOut.String())
		}
	}
	if strings.Contains(errOut.String(), "placeholder-") || strings.Contains(errOut.String(), "pgtools-check-config-") {
		t.Errorf("a placeholder path leaked:\n%s", errOut.String())
	}
}
