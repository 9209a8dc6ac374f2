package mcpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/mcpapi"
	"github.com/pgtools/pgtools/runner/mcptest"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/schemas"
	"github.com/pgtools/pgtools/tools"
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
	t.Run("stdio", func(t *testing.T) {
		for _, mode := range []string{"elicit", "plain"} {
			t.Run(mode, func(t *testing.T) {
				t.Parallel()
				testTypeScriptStdio(ctx, t, dir, mode)
			})
		}
	})
	api := runnertest.NewMCPAPI(t)

	node := func(token string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "node", "client.mjs", api.Srv.URL+"/mcp", token)
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

	out, err = node(runnertest.AgentToken)
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
			Name         string
			Annotations  map[string]any
			InputSchema  map[string]any
			OutputSchema map[string]any
		}
		ListHints struct {
			TTLMs      int
			CacheScope string
			Catalog    string
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
	// The TypeScript SDK's latest version: the server, which offers a later one, answers with it.
	if report.ProtocolVersion != "2025-11-25" {
		t.Errorf("protocol version %q", report.ProtocolVersion)
	}
	if report.Server.Name != "pgtools" || len(report.Tools) != len(schemas.ToolNames()) {
		t.Fatalf("server %+v, %d tools", report.Server, len(report.Tools))
	}
	// tools/list in name order, with the cache hints and catalog digest (mcpapi.NewMCPServerWith).
	if !slices.IsSortedFunc(report.Tools, func(a, b struct {
		Name         string
		Annotations  map[string]any
		InputSchema  map[string]any
		OutputSchema map[string]any
	}) int {
		return strings.Compare(a.Name, b.Name)
	}) {
		t.Errorf("tools/list is not in name order")
	}
	if h := report.ListHints; h.TTLMs != int(mcpapi.ToolsListTTL.Milliseconds()) || h.CacheScope != "private" || h.Catalog == "" {
		t.Errorf("tools/list hints as the TypeScript client sees them: %+v", h)
	}
	for _, tool := range report.Tools {
		if want, ok := mcptest.ServedSchema(tool.Name); !ok || !reflect.DeepEqual(tool.InputSchema, want) {
			t.Errorf("%s: the input schema the TypeScript client sees is not schemas/%s.json", tool.Name, tool.Name)
		}
		if tool.Name == "select_query" {
			wantHints := map[string]any{"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}
			if !reflect.DeepEqual(tool.Annotations, wantHints) {
				t.Errorf("select_query annotations: %v", tool.Annotations)
			}
		}
	}
	// By default a result is its object once, as the one text item (mcp.structured_content off).
	fromText := func(name string, c *callOutcome) {
		t.Helper()
		if len(c.Text) != 1 || json.Unmarshal([]byte(c.Text[0]), &c.Structured) != nil || c.Structured == nil {
			t.Errorf("%s: text content %q is not one JSON object", name, c.Text)
		}
	}
	for _, tool := range report.Tools {
		if tool.OutputSchema != nil {
			t.Errorf("%s: an outputSchema without mcp.structured_content", tool.Name)
		}
	}
	for name, c := range map[string]*callOutcome{"select_query": &report.Select, "insert_data": &report.RefusedWrite, "malformed": &report.Malformed} {
		if c.Structured != nil {
			t.Errorf("%s: structuredContent beside the text: the model would read the result twice", name)
		}
		fromText(name, c)
	}
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

// testTypeScriptStdio runs testdata/mcp-ts/stdio-client.mjs against ServeMCPStdio on the node
// process's stdout and stdin: elicitation (mode "elicit": the DROP of table keep declined, the
// DROP of doomed and the delete of 150 rows accepted; mode "plain": no elicitation, today's
// refusal and the delete as sent), outputSchema validation by the TypeScript SDK (the server
// runs with structured content on: that is the SDK that validates it), progress
// notifications, and a cancelled call whose statement leaves pg_stat_activity.
func testTypeScriptStdio(ctx context.Context, t *testing.T, dir, mode string) {
	f := newMCPFeatures(t)
	f.db.Exec(t, `CREATE TABLE keep (id int); ALTER TABLE keep OWNER TO "`+f.db.RoleName("mcpf")+`"`)
	reportFile := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.CommandContext(ctx, "node", "stdio-client.mjs", reportFile, mode)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// Pipes of our own, not cmd.StdinPipe/StdoutPipe: Wait closes those when node exits, while
	// the server may still be reading or closing them.
	nodeIn, toNode, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromNode, nodeOut, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin, cmd.Stdout = nodeIn, nodeOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	nodeIn.Close()
	nodeOut.Close()
	defer toNode.Close()
	served := make(chan error, 1)
	go func() {
		p := tools.Principal{Name: "mcp-stdio", Scopes: []string{"read", "write", "ddl"}}
		served <- mcpapi.ServeMCPStdio(ctx, f.reg, p, fromNode, toNode, zerolog.Nop(), mcpapi.MCPOptions{StructuredContent: true})
	}()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("stdio-client.mjs: %v\n%s", err, stderr.String())
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("ServeMCPStdio: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeMCPStdio did not return after the client exited: a cancelled statement still runs?")
	}
	raw, err := os.ReadFile(reportFile)
	if err != nil {
		t.Fatalf("no report: %v\n%s", err, stderr.String())
	}
	type outcome struct {
		IsError    bool
		Structured map[string]any
		Thrown     string
	}
	var r struct {
		DropDeclined, DropAccepted, BigDelete, Slow, Cancelled outcome
		Progress                                               int
		Questions                                              []string
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("report: %v: %s", err, raw)
	}
	t.Logf("%s: %s", mode, raw)
	exists := func(table string) bool {
		return f.db.QueryInt(t, "SELECT count(*) FROM pg_class WHERE relname = $1 AND relkind = 'r'", table) == 1
	}
	refused := func(o outcome) bool { return o.IsError && o.Structured["errorType"] == "confirmation_required" }
	bigLeft := f.db.QueryInt(t, "SELECT count(*) FROM big")
	if mode == "elicit" {
		if !refused(r.DropDeclined) || !exists("keep") || r.DropAccepted.IsError || r.DropAccepted.Thrown != "" || exists("doomed") {
			t.Errorf("elicited DROPs: declined %+v, accepted %+v", r.DropDeclined, r.DropAccepted)
		}
		if r.BigDelete.IsError || r.BigDelete.Structured["affectedRows"] != float64(150) || bigLeft != 0 {
			t.Errorf("accepted delete: %+v, %d rows left", r.BigDelete, bigLeft)
		}
		if len(r.Questions) != 3 || !strings.Contains(r.Questions[0], "DROP TABLE keep") || !strings.Contains(r.Questions[2], "delete 150 rows of table big") {
			t.Errorf("questions: %q", r.Questions)
		}
	} else {
		if !refused(r.DropDeclined) || !refused(r.DropAccepted) || !exists("keep") || !exists("doomed") || len(r.Questions) != 0 {
			t.Errorf("DROPs without elicitation: %+v %+v, questions %q", r.DropDeclined, r.DropAccepted, r.Questions)
		}
		if r.BigDelete.IsError || bigLeft != 0 {
			t.Errorf("delete without elicitation: %+v, %d rows left", r.BigDelete, bigLeft)
		}
	}
	if r.Slow.IsError || r.Slow.Thrown != "" || r.Progress != 2 {
		t.Errorf("slow call: %+v with %d progress notifications, want 2", r.Slow, r.Progress)
	}
	if r.Cancelled.Thrown == "" {
		t.Errorf("cancelled call: %+v", r.Cancelled)
	}
	if n := f.db.QueryInt(t, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '%ts_cancel_me%' AND pid <> pg_backend_pid()"); n != 0 {
		t.Errorf("the cancelled statement still runs")
	}
}
