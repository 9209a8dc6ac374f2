package mcpapi

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/pgtools/pgtools/tools"
)

// TestMCPServerKeyCoversThePrincipal: /mcp keeps a server per principal, and a server is bound to
// its principal, so two principals that differ in any field (a role, claims, a tool allow-list,
// a cap …) must never share one. Every field of tools.Principal is changed in turn, so a field
// added later is covered without editing this test.
func TestMCPServerKeyCoversThePrincipal(t *testing.T) {
	t.Parallel()
	built := 0
	c := newMCPServers(100, func(tools.Principal) *mcp.Server { built++; return mcp.NewServer(&mcp.Implementation{Name: "t"}, nil) })
	base := tools.Principal{Name: "hub:alice", Scopes: []string{"read"}, Databases: []string{"default"}, Role: "agent",
		Claims: []byte(`{"sub":"alice"}`), Tools: []string{"select_query"}, MaxResponseBytes: 1000, DefaultFormat: "objects"}
	first := c.get(base)
	if c.get(base) != first || built != 1 {
		t.Fatalf("the same principal got a second server (built %d)", built)
	}
	v := reflect.ValueOf(base)
	for i := range v.NumField() {
		changed := base
		f := reflect.ValueOf(&changed).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Int, reflect.Int64:
			f.SetInt(f.Int() + 1)
		case reflect.Float64:
			f.SetFloat(f.Float() + 1.5)
		case reflect.Slice:
			if f.Type().Elem().Kind() == reflect.Uint8 {
				f.SetBytes([]byte(`{"sub":"bob"}`))
			} else if f.Type().Elem().Kind() == reflect.String {
				f.Set(reflect.Append(f, reflect.ValueOf("more")))
			} else {
				f.Set(reflect.Append(f, reflect.Zero(f.Type().Elem()))) // one more element of any type
			}
		default:
			t.Fatalf("field %s of kind %s: teach this test to change it", v.Type().Field(i).Name, f.Kind())
		}
		if c.get(changed) == first {
			t.Errorf("a principal differing only in %s shares the server of another", v.Type().Field(i).Name)
		}
	}
}

// TestMCPServersAreBounded: per-user principals (JWT, act-as) are unbounded in number, so the
// servers kept are capped; the least recently used goes first and is built again when needed.
func TestMCPServersAreBounded(t *testing.T) {
	t.Parallel()
	built := 0
	c := newMCPServers(3, func(tools.Principal) *mcp.Server { built++; return mcp.NewServer(&mcp.Implementation{Name: "t"}, nil) })
	p := func(n int) tools.Principal {
		return tools.Principal{Name: fmt.Sprint("user-", n), Claims: []byte(`{}`)}
	}
	for n := range 10 {
		c.get(p(n))
		c.get(p(0)) // kept in use, so never the oldest
	}
	if c.len() != 3 || built != 10 {
		t.Fatalf("kept %d servers, built %d; want 3 kept, 10 built", c.len(), built)
	}
	c.get(p(0))
	c.get(p(9))
	if built != 10 {
		t.Errorf("recently used servers were built again (%d builds)", built)
	}
	c.get(p(1)) // dropped long ago
	if built != 11 {
		t.Errorf("a dropped principal's server was not built again (%d builds)", built)
	}
}

// len is how many servers are kept.
func (c *mcpServers) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
