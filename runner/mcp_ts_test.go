package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pgtools/pgtools/schemas"
)

// TestMCPTypeScriptClient runs the official TypeScript MCP SDK (testdata/mcp-ts/client.mjs) against
// /mcp: a second client, written by other people, must see the same catalog and results as the
// go-sdk one. It needs node and npm (and the npm registry, for npm ci); without them it skips
// locally and fails in CI.
func TestMCPTypeScriptClient(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not on PATH; CI must run the TypeScript MCP client test (install Node 20 or newer)", tool)
			}
			t.Skipf("%s is not on PATH: skipping the TypeScript MCP client test (install Node 20 or newer to run it)", tool)
		}
	}
	dir := filepath.Join("testdata", "mcp-ts")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	npm := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	npm.Dir = dir
	if out, err := npm.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
	api := newMCPAPI(t)

	node := func(token string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "node", "client.mjs", api.srv.URL+"/mcp", token)
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if stderr.Len() > 0 {
			t.Logf("client.mjs stderr: %s", stderr.String())
		}
		return out, err
	}

	out, err := node("wrong-token-0123456789abcdef")
	var refused struct {
		ConnectError string
		Code         int
	}
	if err == nil || json.Unmarshal(out, &refused) != nil || refused.Code != 401 || !strings.Contains(refused.ConnectError, "authentication_error") {
		t.Fatalf("a wrong token: err %v, output %s", err, out)
	}

	out, err = node(agentToken)
	if err != nil {
		t.Fatalf("client.mjs: %v\n%s", err, out)
	}
	type callOutcome struct {
		IsError    bool
		Structured map[string]any
		Text       []string
	}
	var report struct {
		Server          struct{ Name, Version string }
		ProtocolVersion string
		Tools           []struct {
			Name        string
			Annotations map[string]any
			InputSchema map[string]any
		}
		Select, RefusedWrite, Malformed callOutcome
		UnknownTool                     struct {
			Code    int
			Message string
		}
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("client.mjs output is not the report: %v\n%s", err, out)
	}
	t.Logf("TypeScript SDK client: server %s %s, protocol %s", report.Server.Name, report.Server.Version, report.ProtocolVersion)
	if report.Server.Name != "pgtools" || len(report.Tools) != len(schemas.ToolNames()) {
		t.Fatalf("server %+v, %d tools", report.Server, len(report.Tools))
	}
	for _, tool := range report.Tools {
		raw, ok := schemas.Tool(tool.Name)
		var want map[string]any
		if !ok || json.Unmarshal(raw, &want) != nil || !reflect.DeepEqual(tool.InputSchema, want) {
			t.Errorf("%s: the input schema the TypeScript client sees is not schemas/%s.json", tool.Name, tool.Name)
		}
		if tool.Name == "select_query" {
			wantHints := map[string]any{"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}
			if !reflect.DeepEqual(tool.Annotations, wantHints) {
				t.Errorf("select_query annotations: %v", tool.Annotations)
			}
		}
	}
	sameText := func(name string, c callOutcome) {
		t.Helper()
		var fromText map[string]any
		if len(c.Text) != 1 || json.Unmarshal([]byte(c.Text[0]), &fromText) != nil || !reflect.DeepEqual(fromText, c.Structured) {
			t.Errorf("%s: text content %q is not the structured content %v", name, c.Text, c.Structured)
		}
	}
	sameText("select_query", report.Select)
	sameText("insert_data", report.RefusedWrite)
	sameText("malformed", report.Malformed)
	if s := report.Select; s.IsError || s.Structured["success"] != true || s.Structured["rowCount"] != float64(3) {
		t.Errorf("select_query: %+v", s)
	}
	if w := report.RefusedWrite; !w.IsError || w.Structured["errorType"] == nil || w.Structured["errorType"] == "" || w.Structured["suggestion"] == "" {
		t.Errorf("insert_data without write intent: %+v", w)
	}
	if m := report.Malformed; !m.IsError || m.Structured["errorType"] != "invalid_arguments" {
		t.Errorf("malformed select_query: %+v", m)
	}
	if u := report.UnknownTool; u.Code != -32602 || !strings.Contains(u.Message, "drop_everything") {
		t.Errorf("unknown tool: %+v", u)
	}
}
