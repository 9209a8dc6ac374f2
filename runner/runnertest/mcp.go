package runnertest

import (
	"context"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pgtools/pgtools/runner/mcptest"
)

// Elicitor answers every elicitation with Action and records the questions. Its Handle is an
// mcp.ClientOptions.ElicitationHandler; it is safe for concurrent use.
type Elicitor struct {
	Action string
	mu     sync.Mutex
	asked  []string
}

// Handle records req's message and answers Action.
func (e *Elicitor) Handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.asked = append(e.asked, req.Params.Message)
	return &mcp.ElicitResult{Action: e.Action}, nil
}

// Questions are the messages asked so far, in order.
func (e *Elicitor) Questions() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.asked...)
}

// CallOut calls tool with args on cs and decodes the result; a protocol error fails the test.
func CallOut(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any) mcptest.Outcome {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return mcptest.Decode(t, res)
}
