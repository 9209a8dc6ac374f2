package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// TestDemoPortTaken: a taken listen port fails the demo at once, before PostgreSQL starts and the
// data loads, and the message names --listen and how make demo passes it.
func TestDemoPortTaken(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	start := time.Now()
	code := run(ctx, []string{"demo", "--listen", l.Addr().String(), "--events", "100"}, &out, &errOut, envOf(nil))
	if code != 1 || time.Since(start) > 5*time.Second {
		t.Fatalf("exit %d after %s, want 1 at once:\n%s%s", code, time.Since(start), out.String(), errOut.String())
	}
	for _, want := range []string{l.Addr().String(), "another program is listening there", "--listen 127.0.0.1:8081", "make demo ARGS="} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
	if strings.Contains(out.String(), "starting a throwaway PostgreSQL") {
		t.Errorf("the demo started PostgreSQL before checking its port:\n%s", out.String())
	}
}

// TestDemoConfigRolePerToken: the demo follows docs/identity.md's advice: when it makes its own roles,
// every token runs as a role of its own, so check-config has no note on its configuration.
func TestDemoConfigRolePerToken(t *testing.T) {
	t.Parallel()
	cfg := demoConfig("127.0.0.1:8080", "postgres://pgtools_demo@127.0.0.1:5432/pgtools_demo", "demo-token-0123456789abcdef", "tenant-token-0123456789abcdef")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tok := range cfg.Tokens {
		if tok.Role == "" {
			t.Errorf("token %s runs as the login role", tok.Name)
		}
	}
	if notes := cfg.SharedRoleNotes(); len(notes) > 0 {
		t.Errorf("notes on the demo's configuration: %v", notes)
	}
}
