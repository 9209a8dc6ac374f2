package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/pgtools/pgtools/runner/demodata"
)

// demoHelp is what the demo prints once it serves: where, with which token, and how to reach it
// from curl, the CLI and an MCP client.
type demoHelp struct {
	addr, token string
	// tenantToken acts for end users (X-PgTools-Act-As) as the demo's tenant role; "" when the
	// demo did not create its roles (--database-url).
	tenantToken string
	// dsn is the demo role's connection string for pgtools mcp; "" when the caller gave
	// --database-url, whose role is the caller's own (often a superuser) and is not echoed.
	dsn string
	// cmd is pgtools as the user invoked it ("./bin/pgtools" after make demo), for commands run
	// from the same shell; abs is its absolute path, for MCP clients started elsewhere.
	cmd, abs string
}

// demoMCPMarker introduces the MCP client snippet, the one part of the help that is not shell.
const demoMCPMarker = "MCP client configuration"

func printDemoHelp(w io.Writer, h demoHelp) {
	base := "http://" + h.addr
	auth := `curl -s -H "Authorization: Bearer $PGTOOLS_TOKEN" -X POST $PGTOOLS_URL`
	fmt.Fprintf(w, `
pgtools demo is running on %[1]s — press Ctrl-C to stop and clean up.
In another terminal, from the repository's root:

  export PGTOOLS_URL=%[1]s PGTOOLS_TOKEN=%[2]s

  # list the tables
  %[3]s/v1/tools/describe_schema -d '{}'

  # describe one table
  %[3]s/v1/tools/describe_schema -d '{"table":"orders"}'

  # read with a bound parameter, sorted and paged
  %[3]s/v1/tools/select_query \
    -d '{"table":"orders","columns":"id,status,total","where":"status = $1","params":["paid"],"order_by":"total desc","limit":5}'

  # free SQL, read only: aggregates and joins
  %[3]s/v1/tools/execute_sql \
    -d '{"sql":"select c.country, count(*) as orders, sum(o.total) as revenue from orders o join customers c on c.id = o.customer_id group by 1 order by 3 desc limit 5"}'

  # a write sent as a read: PostgreSQL refuses it in the READ ONLY transaction (read_only_violation)
  %[3]s/v1/tools/execute_sql -d '{"sql":"delete from orders where id = 0"}'

  # the same write with intent: mode write and autocommit (there is no order 0, so affectedRows is 0)
  %[3]s/v1/tools/execute_sql -d '{"sql":"delete from orders where id = 0","mode":"write","autocommit":true}'

  # a mistake and the suggestion that fixes it (invalid_column)
  %[3]s/v1/tools/select_query -d '{"table":"orders","columns":"id,totl"}'

  # the 1,000,000-row table: capped at the default limit, truncated: true
  %[3]s/v1/tools/execute_sql -d '{"sql":"select * from events"}' | head -c 300; echo

  # or with the CLI
  %[4]s call select_query '{"table":"customers","limit":3}'

  # every read and write example
  bash examples/curl/read.sh
  bash examples/curl/write.sh
`, base, h.token, auth, shellQuote(h.cmd))
	if h.tenantToken != "" {
		fmt.Fprintf(w, `
  # acting for end users: token "tenants" runs as role %[2]s, and row-level security on
  # tenant_notes shows each user only their own notes (alice has two, bob one)
  export PGTOOLS_TENANTS_TOKEN=%[1]s
  curl -s -H "Authorization: Bearer $PGTOOLS_TENANTS_TOKEN" -H "X-PgTools-Act-As: alice" -X POST $PGTOOLS_URL/v1/tools/select_query -d '{"table":"tenant_notes"}'
  curl -s -H "Authorization: Bearer $PGTOOLS_TENANTS_TOKEN" -H "X-PgTools-Act-As: bob" -X POST $PGTOOLS_URL/v1/tools/select_query -d '{"table":"tenant_notes"}'
`, h.tenantToken, demodata.TenantRole)
	}
	fmt.Fprintf(w, "\nMCP: %s/mcp with the same token (Streamable HTTP), or pgtools mcp on stdio:\n\n", base)
	if h.dsn == "" {
		fmt.Fprintf(w, "  # the runner uses your --database-url; give pgtools mcp a least-privilege role's URL:\n"+
			"  # DATABASE_URL='postgres://role@host/db' %s mcp --scopes read\n\n", shellQuote(h.cmd))
		return
	}
	fmt.Fprintf(w, `  # the demo's least-privilege role (pgtools_demo), as the runner connects
  export DATABASE_URL='%[1]s'
  # MCP on standard input and output, for a client that starts pgtools (reads JSON-RPC; Ctrl-D ends it)
  %[2]s mcp --scopes read

%[3]s (Claude Desktop's mcpServers, an IDE, an agent framework):

%[4]s

`, h.dsn, shellQuote(h.cmd), demoMCPMarker, mcpClientConfig(h.abs, h.dsn))
}

// mcpClientConfig is the mcpServers entry that starts pgtools mcp as the demo role.
func mcpClientConfig(command, dsn string) string {
	type server struct {
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Env     map[string]string `json:"env"`
	}
	doc := map[string]map[string]server{"mcpServers": {"pgtools-demo": {
		Command: command, Args: []string{"mcp", "--scopes", "read"}, Env: map[string]string{"DATABASE_URL": dsn}}}}
	b, _ := json.MarshalIndent(doc, "", "  ")
	return string(b)
}

// shellQuote quotes s for a POSIX shell when it holds anything but plain path characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// invokedAs is pgtools as the user ran it: the path they typed ("./bin/pgtools", "/usr/local/bin/
// pgtools"), or "pgtools" when the shell found it on PATH.
func invokedAs() string {
	if strings.ContainsRune(os.Args[0], filepath.Separator) {
		return os.Args[0]
	}
	return "pgtools"
}

// executablePath is the absolute path of this binary, which an MCP client needs (it does not
// start pgtools in the user's directory), or "pgtools" when it cannot be found.
func executablePath() string {
	p, err := os.Executable()
	if err != nil {
		return "pgtools"
	}
	return p
}

// checkListen binds addr once and lets it go, so the demo fails before its slow setup when the
// port is taken, naming the flag that picks another.
func checkListen(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err == nil {
		return l.Close()
	}
	reason := err.Error()
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		reason = oe.Err.Error()
	}
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		reason = "another program is listening there"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		reason = "that address is not one of this machine's"
	case errors.Is(err, syscall.EACCES):
		reason = "ports below 1024 need root"
	}
	return fmt.Errorf("cannot listen on %s: %s; pick a free port with --listen, e.g. pgtools demo --listen 127.0.0.1:8081 (make demo ARGS='--listen 127.0.0.1:8081')", addr, reason)
}
