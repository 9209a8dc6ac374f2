package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pgtools/pgtools/runner/mcptest"
	"github.com/pgtools/pgtools/tools/pgtest"
)

// buildPgtools builds the pgtools binary into a temporary directory, so the stdio tests run the
// real command as an MCP client would start it.
func buildPgtools(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pgtools")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startMCP starts "pgtools mcp args..." under the go-sdk client's command transport and returns
// the session, the command (its ProcessState is set once the session is closed) and its stderr.
func startMCP(t *testing.T, bin string, env []string, args ...string) (*mcp.ClientSession, *exec.Cmd, *lockedBuffer) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"mcp"}, args...)...)
	// Only what the test sets: no DATABASE_URL or PGTOOLS_* from the developer's shell.
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "pgtools-test", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("pgtools mcp: %v\nstderr: %s", err, stderr.String())
	}
	return cs, cmd, stderr
}

func TestMCPStdio(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, mcptest.Fixture)
	dsn := db.RoleDSN(t, "mcp_stdio")
	bin := buildPgtools(t)

	t.Run("database from the flag", func(t *testing.T) {
		cs, cmd, stderr := startMCP(t, bin, nil, "--database-url", dsn)
		mcptest.Check(t, cs)
		if err := cs.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		// Closing stdin is how a stdio client says goodbye: a clean exit.
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 0 {
			t.Fatalf("pgtools mcp did not exit cleanly: %v\n%s", cmd.ProcessState, stderr.String())
		}
		logs := stderr.String()
		if !strings.Contains(logs, `"message":"pgtools mcp serving"`) || !strings.Contains(logs, `"principal":"mcp-stdio","tool":"select_query"`) {
			t.Fatalf("stderr lacks the start line or the call lines:\n%s", logs)
		}
		if strings.Contains(logs, dsn) {
			t.Fatalf("stderr contains the DSN:\n%s", logs)
		}
	})

	t.Run("database from a config file, read scope only", func(t *testing.T) {
		cfgFile := filepath.Join(t.TempDir(), "pgtools.json")
		// The listen address is the HTTP server's business; it must not stop stdio.
		cfg := `{"listen": "0.0.0.0:8080", "databases": {"default": {"url": "` + dsn + `"}}}`
		if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		cs, _, stderr := startMCP(t, bin, []string{"PGTOOLS_CONFIG=" + cfgFile}, "--scopes", "read")
		defer cs.Close()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "insert_data",
			Arguments: map[string]any{"table": "orders", "row": map[string]any{"id": 9, "status": "new"}, "autocommit": true}})
		if err != nil {
			t.Fatal(err)
		}
		out := mcptest.Decode(t, res)
		if !out.IsError || out.Object["errorType"] != "not_allowed" || !strings.Contains(out.Object["error"].(string), `lacks the "write" scope`) {
			t.Fatalf("insert_data with --scopes read: %s\n%s", out.Text, stderr.String())
		}
		// Over stdio there is no token: the fix is the flag the MCP client starts pgtools with.
		if fix, _ := out.Object["suggestion"].(string); !strings.Contains(fix, "--scopes read,write") || strings.Contains(out.Text, "token") {
			t.Errorf("insert_data with --scopes read names no --scopes fix, or a token: %s", out.Text)
		}
		res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "select_query", Arguments: map[string]any{"table": "orders"}})
		if err != nil || res.IsError {
			t.Fatalf("select_query with --scopes read: %v %+v", err, res)
		}
	})
}

func TestMCPRefusesBadSettings(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"mcp"}, "no database configured"},
		{[]string{"mcp", "--database-url", "postgres://u@127.0.0.1/db", "--scopes", "read,admin"}, `unknown scope "admin"`},
		{[]string{"mcp", "--database-url", "postgres://u@127.0.0.1/db", "--scopes", ""}, "no scope given"},
		{[]string{"mcp", "--config", "/nonexistent/pgtools.json"}, "reading config file"},
		{[]string{"mcp", "extra-argument"}, "Usage: pgtools mcp"},
	}
	for _, c := range cases {
		var out, errOut bytes.Buffer
		code := run(context.Background(), c.args, &out, &errOut, envOf(nil))
		if code != 2 || !strings.Contains(errOut.String(), c.want) || out.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q, want %q on stderr only", c.args, code, out.String(), errOut.String(), c.want)
		}
	}
}
