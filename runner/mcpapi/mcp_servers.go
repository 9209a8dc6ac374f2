package mcpapi

import (
	"container/list"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pgtools/pgtools/tools"
)

// mcpServerCacheSize bounds the MCP servers /mcp keeps: one per principal recently seen.
// Building a server costs about 1.2 ms and 1.3 MB of allocation, which every call of a per-user
// principal (JWT, act-as) used to pay; a kept server holds about 9 KB, so 1,024 of them hold
// about 9 MB, and the configured tokens alone never come near the bound.
const mcpServerCacheSize = 1024

// mcpServers keeps the MCP servers of the principals most recently served, dropping the least
// recently used one beyond its size. A server is bound to its principal (NewMCPServer), so the
// key is the whole principal: two principals share a server only when everything that decides
// what a call may do and as whom it runs (name, scopes, databases, tools, role, claims, caps and
// format) is the same.
type mcpServers struct {
	size  int
	build func(tools.Principal) *mcp.Server

	mu    sync.Mutex
	order *list.List // of *keptServer, most recently used first
	byKey map[string]*list.Element
}

type keptServer struct {
	key    string
	server *mcp.Server
}

func newMCPServers(size int, build func(tools.Principal) *mcp.Server) *mcpServers {
	return &mcpServers{size: size, build: build, order: list.New(), byKey: map[string]*list.Element{}}
}

// principalKey identifies a principal by every field it has: the fields are all plain data, and a
// field added later takes part without anyone remembering to add it here.
func principalKey(p tools.Principal) string {
	b, err := json.Marshal(p)
	if err != nil {
		panic("runner: a principal that does not marshal: " + err.Error()) // plain data: unreachable
	}
	return string(b)
}

// get returns p's server, building it on first use. It is built outside the lock, so one
// principal's first call never holds up the calls of others.
func (c *mcpServers) get(p tools.Principal) *mcp.Server {
	key := principalKey(p)
	c.mu.Lock()
	if e, ok := c.byKey[key]; ok {
		c.order.MoveToFront(e)
		s := e.Value.(*keptServer).server
		c.mu.Unlock()
		return s
	}
	c.mu.Unlock()
	s := c.build(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok { // built meanwhile by a concurrent first call: share that one
		c.order.MoveToFront(e)
		return e.Value.(*keptServer).server
	}
	c.byKey[key] = c.order.PushFront(&keptServer{key: key, server: s})
	for c.order.Len() > c.size {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.byKey, oldest.Value.(*keptServer).key)
	}
	return s
}
