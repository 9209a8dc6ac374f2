#!/usr/bin/env bash
# Approvals end to end (docs/approvals.md), against a runner whose database has the rule
#   "require_approval": [{"when": "rows_over", "rows": 100}]
# and the demo's orders table, with two tokens: the caller's (read, write) and an approver's
# (scope approve), e.g. pgtools serve with docs/approvals.md's config. Then:
#   export PGTOOLS_URL=http://127.0.0.1:8080 PGTOOLS_TOKEN=... PGTOOLS_APPROVER_TOKEN=...
#   bash examples/curl/approvals.sh
# It can run again and again, and exits 1 when an answer is not the one shown.
set -euo pipefail
: "${PGTOOLS_URL:?export PGTOOLS_URL}"
: "${PGTOOLS_TOKEN:?export PGTOOLS_TOKEN (the caller: scopes read, write)}"
: "${PGTOOLS_APPROVER_TOKEN:?export PGTOOLS_APPROVER_TOKEN (another person: scope approve)}"

send() { # send TOKEN METHOD PATH [JSON] — prints the answer and keeps it in $OUT
  echo "--- $2 $3 ${4:-}" >&2
  local args=(-sS -H "Authorization: Bearer $1" -H 'Content-Type: application/json' -X "$2" "$PGTOOLS_URL$3")
  if [ -n "${4:-}" ]; then args+=(-d "$4"); fi
  OUT=$(curl "${args[@]}")
  echo "$OUT"
}
expect() { # expect ERRORTYPE — the last answer's errorType ("" for a success)
  local got
  got=$(sed -n 's/.*"errorType":"\([^"]*\)".*/\1/p' <<<"$OUT")
  if [ "$got" != "$1" ]; then
    echo "approvals.sh: expected ${1:-a success}, got ${got:-a success}" >&2
    exit 1
  fi
}

# 150 orders would change: the call runs, is measured, rolled back, and waits for approval.
CALL='{"table":"orders","set":{"note":"bulk-reviewed"},"where":"id <= $1","params":[150],"returning":"id","autocommit":true}'
send "$PGTOOLS_TOKEN" POST /v1/tools/update_data "$CALL"
expect approval_required
ID=$(sed -n 's/.*"approval":{"id":"\(apr_[0-9a-f]*\)".*/\1/p' <<<"$OUT")

# The caller cannot approve its own request.
send "$PGTOOLS_TOKEN" POST "/v1/approvals/$ID" '{"decision":"approve"}'
expect not_allowed

# The approver lists what waits (caller, arguments, rows per table), and approves it.
send "$PGTOOLS_APPROVER_TOKEN" GET /v1/approvals
expect ""
send "$PGTOOLS_APPROVER_TOKEN" POST "/v1/approvals/$ID" '{"decision":"approve"}'
expect ""

# The same call with approval_id commits, because it changes exactly the approved 150 rows.
WITH_ID="${CALL%\}},\"approval_id\":\"$ID\"}"
send "$PGTOOLS_TOKEN" POST /v1/tools/update_data "$WITH_ID"
expect ""

# An approval is used once.
send "$PGTOOLS_TOKEN" POST /v1/tools/update_data "$WITH_ID"
expect invalid_arguments
