package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgtools/pgtools/runner/state"
	"github.com/pgtools/pgtools/tools/pgtest"
)

// TestStateSetup: with state naming a database whose login role may not create the schema,
// check-config --database prints the SQL an administrator runs (exit 1) and serve refuses to
// start with the same SQL; once it ran, check-config has nothing to say about the state and
// serve starts. A schema of a newer version stops serve, saying so; so does a replica claiming
// the tag of a live replica with another id.
func TestStateSetup(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	dsn := db.RoleDSN(t, "stateless")
	file := filepath.Join(t.TempDir(), "pgtools.json")
	os.WriteFile(file, []byte(`{"databases": {"default": {"url": "`+dsn+`"}}, "state": "default"}`), 0o600)
	check := func() (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"check-config", "--database", "--config", file}, &out, &errOut, envOf(nil))
		return code, out.String(), errOut.String()
	}
	serve := func(id string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var out, errOut bytes.Buffer
		code := run(ctx, []string{"serve", "--config", file, "--listen", "127.0.0.1:0", "--replica-id", id}, &out, &errOut, envOf(nil))
		if code == 0 {
			return ""
		}
		return errOut.String()
	}
	code, out, errOut := check()
	if code != 1 || !strings.Contains(out, `CREATE SCHEMA IF NOT EXISTS "pgtools"`) || !strings.Contains(out, "-- state database default") ||
		!strings.Contains(errOut, "would refuse to start") {
		t.Fatalf("check-config: %d\n%s\n%s", code, out, errOut)
	}
	start := out[strings.Index(out, "BEGIN;"):]
	escaped, _ := json.Marshal(start) // serve logs the error as JSON
	if msg := serve("r1"); !strings.Contains(msg, "an administrator runs this SQL") || !strings.Contains(msg, strings.Trim(string(escaped), `"`)) {
		t.Fatalf("serve without the schema: %s", msg)
	}
	db.Exec(t, start)
	if code, out, _ := check(); strings.Contains(out, "state database") {
		t.Fatalf("check-config after the SQL ran: %d %s", code, out)
	}
	// A live replica r1 holds its tag; serve with the same id takes the row over, another id
	// with the same tag is refused. The tag of "0000000a" is itself.
	db.Exec(t, `INSERT INTO pgtools.replicas VALUES ('other', '0000000a', 'http://x', now(), now())`)
	if msg := serve("0000000a"); !strings.Contains(msg, "live replica other holds it") {
		t.Fatalf("a tag clash: %s", msg)
	}
	db.Exec(t, `UPDATE pgtools.schema_version SET version = $1`, state.Version+1)
	if msg := serve("r2"); !strings.Contains(msg, "newer pgtools upgraded it") {
		t.Fatalf("a newer schema: %s", msg)
	}
}
