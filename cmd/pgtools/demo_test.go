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
