package mcpapi_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeMCPConfigs checks the MCP client configurations in docs/mcp.md (blocks marked
// "json mcp-config"): each is valid JSON whose every server starts "pgtools mcp" (directly or
// through a bridge) or connects to /mcp, and the stdio and HTTP forms of four clients are there.
func TestReadmeMCPConfigs(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```json mcp-config\n(.*?)```").FindAllSubmatch(readme, -1)
	if len(blocks) != 8 {
		t.Fatalf("found %d mcp-config blocks, want 8 (stdio and HTTP for Claude Desktop, Claude Code, Cursor, VS Code)", len(blocks))
	}
	type server struct {
		Type, Command, URL string
		Args               []string
		Env, Headers       map[string]string
	}
	for i, b := range blocks {
		var cfg struct {
			MCPServers map[string]server `json:"mcpServers"`
			Servers    map[string]server `json:"servers"`
		}
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(b[1], &doc); err != nil {
			t.Errorf("block %d is not valid JSON: %v\n%s", i+1, err, b[1])
			continue
		}
		if err := json.Unmarshal(b[1], &cfg); err != nil {
			t.Errorf("block %d: %v", i+1, err)
			continue
		}
		all := cfg.MCPServers
		if all == nil {
			all = cfg.Servers
		}
		if len(all) == 0 {
			t.Errorf("block %d names no server: %s", i+1, b[1])
		}
		for name, s := range all {
			args := strings.Join(s.Args, " ")
			stdio := s.Command == "pgtools" && strings.HasPrefix(args, "mcp") && s.Env["DATABASE_URL"] != ""
			bridge := s.Command == "npx" && strings.Contains(args, "/mcp") && strings.Contains(args, "Authorization: Bearer")
			remote := strings.HasSuffix(s.URL, "/mcp") && strings.HasPrefix(s.Headers["Authorization"], "Bearer ")
			if !stdio && !bridge && !remote {
				t.Errorf("block %d, server %q neither runs pgtools mcp nor reaches /mcp with a token: %+v", i+1, name, s)
			}
		}
	}
}
