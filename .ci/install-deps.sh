#!/usr/bin/env bash
# Installs what a fresh machine may lack, for one purpose:
#   install-deps.sh demo   PostgreSQL server binaries (initdb, postgres) and curl: what make demo needs
#   install-deps.sh test   (the default) those, plus PgBouncer, NGINX, Chromium and Node.js with npm, which tests need
# Idempotent and quiet when everything is present.
set -euo pipefail
purpose=${1:-test}
case $purpose in
  demo | test) ;;
  *) echo "install-deps: unknown purpose '$purpose'; use demo or test" >&2; exit 2 ;;
esac

have_pg() {
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && [ -x "$d/postgres" ] && return 0
  done
  command -v initdb >/dev/null 2>&1 && command -v postgres >/dev/null 2>&1
}

# go.mod's go line is the oldest Go that builds pgtools.
go_need=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$(dirname "$0")/../go.mod")
if ! command -v go >/dev/null 2>&1; then
  echo "install-deps: Go is not on PATH; install Go $go_need or newer (https://go.dev/doc/install)" >&2
  exit 1
fi

missing=()
command -v curl >/dev/null 2>&1 || missing+=(curl)
# PgBouncer: the transaction-pooling test (tools/pgbouncer_test.go) fails under CI without it.
if [ "$purpose" = test ]; then
  { command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]; } || missing+=(pgbouncer)
fi
# NGINX: the fleet test (runner/fleet) runs it as a child process on loopback, no service.
if [ "$purpose" = test ]; then
  { command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; } || missing+=(nginx-light)
fi
# Chromium: the browser test of the approvals page (runner/httpapi/approvals_browser_test.go) drives
# Debian's chromium headless, and fails under CI without it.
if [ "$purpose" = test ] && [ -z "${PGTOOLS_CHROMIUM:-}" ] && [ ! -x /usr/bin/chromium ]; then
  missing+=(chromium)
fi
if [ ${#missing[@]} -gt 0 ] && [ "$(id -u)" = 0 ]; then
  echo "install-deps: installing ${missing[*]}..."
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; }
fi

# Node and npm run the TypeScript MCP client test (runner/mcpapi/testdata/mcp-ts), which fails under CI
# without them.
if [ "$purpose" = test ] && ! { command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; }; then
  if [ "$(id -u)" = 0 ]; then
    echo "install-deps: installing Node.js and npm (apt-get install nodejs npm)..."
    { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null 2>&1 ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; }; } ||
      echo "install-deps: could not install Node.js; the TypeScript MCP client test will skip (fail under CI)" >&2
  else
    echo "install-deps: Node.js 20+ and npm are missing; the TypeScript MCP client test will skip (fail under CI)" >&2
  fi
fi

if have_pg; then
  exit 0
fi
if [ -n "${PG_TEST_DSN:-}" ]; then
  echo "install-deps: no PostgreSQL server binaries, but PG_TEST_DSN is set; tests will use it"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install-deps: PostgreSQL server binaries are missing. Install them (Debian/Ubuntu:" >&2
  echo "  sudo apt-get install -y postgresql), or point the tests at a server with" >&2
  echo "  PG_TEST_DSN=postgres://postgres@127.0.0.1:5432/postgres" >&2
  exit 1
fi
echo "install-deps: installing PostgreSQL server binaries (apt-get install postgresql)..."
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends postgresql >/dev/null
# The Debian package starts a cluster of its own; the tests start throwaway clusters instead.
if command -v pg_lsclusters >/dev/null 2>&1; then
  pg_lsclusters -h 2>/dev/null | while read -r ver name _; do pg_ctlcluster "$ver" "$name" stop 2>/dev/null || true; done
fi
have_pg || { echo "install-deps: PostgreSQL installed but initdb/postgres not found" >&2; exit 1; }
echo "install-deps: PostgreSQL server binaries installed"
