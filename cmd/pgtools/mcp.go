package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/pgtools/pgtools/runner"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/mcpapi"
	"github.com/pgtools/pgtools/runner/version"
	"github.com/pgtools/pgtools/tools"
)

// stdioPrincipal names the one client of "pgtools mcp" in logs, the audit log and session
// ownership.
const stdioPrincipal = "mcp-stdio"

func cmdMCP(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	settings := mcpSettingsFor(fs, getenv)
	scopeList := fs.String("scopes", "read,write", "what the MCP client may do, comma-separated: read, write, ddl")
	confirmRows := fs.Int("confirm-rows", mcpapi.DefaultMCPConfirmRows, "an update_data, delete_data or operator-defined write tool call that would change more rows asks the human first (clients with elicitation); 0 or less: never")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: pgtools mcp [flags]

Serves the tools over MCP on stdin and stdout, for an MCP client that starts pgtools
itself (Claude Desktop, an IDE, an agent framework). The database settings are those of
pgtools serve; logs go to stderr. The client runs as principal %q with --scopes.
Over the network, use pgtools serve: it answers MCP at /mcp, behind its API tokens.

Example client configuration:
  {"command": "pgtools", "args": ["mcp", "--scopes", "read"],
   "env": {"DATABASE_URL": "postgres://app@localhost/app"}}

Flags:
`, stdioPrincipal)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	scopes, err := parseScopes(*scopeList)
	if err != nil {
		fmt.Fprintf(stderr, "pgtools mcp: --scopes: %v\n", err)
		return 2
	}
	cfg, err := settings.load()
	if err != nil {
		fmt.Fprintf(stderr, "pgtools mcp: %v\n", err)
		return 2
	}
	// The stdio client is the only principal: the config file's tokens do not apply, and it gets
	// every session and pg_transaction slot.
	cfg.Tokens = nil
	log := newLogger(stderr, cfg.LogLevel)
	if dbs := cfg.UnapprovableOnStdio(); len(dbs) > 0 {
		log.Warn().Strs("databases", dbs).Msg("require_approval rules apply, but pgtools mcp serves no approvals API: calls they match answer approval_required and can never be approved here; " +
			"serve them with pgtools serve, where an approver's token decides them, or set policy.approval_by_client so a client that can ask its user lets the user decide (docs/approvals.md)")
	}
	// The client runs as the login role, so the table lists must hold for it.
	rt, err := runner.Build(ctx, cfg, log, runner.BuildOptions{Check: func(ctx context.Context, cfg *config.Config, reg *tools.Registry) error {
		return checkGrants(ctx, cfg.LoginRoleUses("the MCP client ("+stdioPrincipal+")"), reg, log)
	}})
	if err != nil {
		log.Error().Err(err).Msg("mcp failed")
		return 1
	}
	defer rt.Close()
	reg := rt.Registry()
	p := tools.Principal{Name: stdioPrincipal, Scopes: scopes, Grant: tools.GrantMCPFlags}
	log.Info().Str("transport", "stdio").Strs("databases", reg.Databases()).Strs("scopes", scopes).
		Str("version", version.Version).Msg("pgtools mcp serving")
	opts := mcpapi.MCPOptions{ConfirmRowsOver: *confirmRows, StructuredContent: cfg.MCP.StructuredContent}
	if *confirmRows <= 0 {
		opts.ConfirmRowsOver = -1
	}
	if err := mcpapi.ServeMCPStdio(ctx, reg, p, os.Stdin, stdout, log, opts); err != nil {
		log.Error().Err(err).Msg("mcp failed")
		return 1
	}
	log.Info().Msg("pgtools mcp stopped")
	return 0
}

// mcpSettingsFor registers pgtools mcp's settings on fs: serve's database settings and
// --structured-content. The listen address and the n8n brokers only concern pgtools serve, so a
// config file's (or anyone's) are left out and cannot stop stdio.
func mcpSettingsFor(fs *flag.FlagSet, getenv func(string) string) *settings {
	s := register(fs, getenv, mcpSettings, false)
	s.remove = []string{"listen", "n8n"}
	return s
}

// parseScopes parses a comma-separated scope list such as "read,write".
func parseScopes(list string) ([]string, error) {
	var scopes []string
	for _, s := range strings.Split(list, ",") {
		switch s = strings.TrimSpace(s); s {
		case "":
		case "read", "write", "ddl":
			scopes = append(scopes, s)
		default:
			return nil, fmt.Errorf("unknown scope %q; scopes are read, write, ddl", s)
		}
	}
	if len(scopes) == 0 {
		return nil, fmt.Errorf("no scope given; use read, write or ddl, e.g. --scopes read")
	}
	return scopes, nil
}
