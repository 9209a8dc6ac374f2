// Command pgtools serves safe PostgreSQL tools for AI agents over HTTP/JSON and MCP.
//
// Subcommands: serve, check-config, healthcheck, demo, call, mcp, version. Run "pgtools help" or "pgtools <command> --help".
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `pgtools — safe PostgreSQL tools for AI agents

Usage:
  pgtools <command> [flags]

Commands:
  serve         run the tool server (HTTP API on 127.0.0.1:8080 by default)
  check-config  validate the configuration serve would use and print it, secrets redacted
  healthcheck   ask a running server whether it is alive or ready (for container health checks)
  demo          start a throwaway PostgreSQL with sample data and a server, print curl examples
  call          call a tool on a running server: pgtools call select_query '{"table":"orders"}'
  mcp           serve the tools over MCP on stdio, for a client that starts pgtools itself
  version       print the version

Run "pgtools <command> --help" for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// run dispatches a subcommand and returns the process exit code. Subcommands read the
// environment only through getenv (os.Getenv in main), so tests give each run its own.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return cmdServe(ctx, args[1:], stdout, stderr, getenv)
	case "check-config":
		return cmdCheckConfig(ctx, args[1:], stdout, stderr, getenv)
	case "healthcheck":
		return cmdHealthcheck(ctx, args[1:], stdout, stderr, getenv)
	case "demo":
		return cmdDemo(ctx, args[1:], stdout, stderr)
	case "call":
		return cmdCall(ctx, args[1:], stdout, stderr, getenv)
	case "mcp":
		return cmdMCP(ctx, args[1:], stdout, stderr, getenv)
	case "version", "--version", "-v":
		return cmdVersion(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "pgtools: unknown command %q\n\n%s", args[0], usage)
	return 2
}
