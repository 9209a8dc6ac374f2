#!/usr/bin/env bash
# Read-path examples against a running runner (pgtools demo prints the values to export):
#   export PGTOOLS_URL=http://127.0.0.1:8080 PGTOOLS_TOKEN=...
#   bash examples/curl/read.sh
# Exits 1 when an answer is not the one shown: an error where a result was expected, or another
# errorType than the one a mistake is meant to show.
set -euo pipefail
: "${PGTOOLS_URL:?export PGTOOLS_URL (pgtools demo prints it)}"
: "${PGTOOLS_TOKEN:?export PGTOOLS_TOKEN (pgtools demo prints it)}"

call() { # call TOOL JSON [ERRORTYPE] — prints the answer; ERRORTYPE is the error it must be, else a result
  echo "--- $1 $2"
  local out got
  out=$(curl -sS -H "Authorization: Bearer $PGTOOLS_TOKEN" -H 'Content-Type: application/json' \
    -X POST "$PGTOOLS_URL/v1/tools/$1" -d "$2")
  echo "$out"
  got=$(sed -n 's/.*"errorType":"\([^"]*\)".*/\1/p' <<<"$out")
  if [ "$got" != "${3:-}" ]; then
    echo "read.sh: expected ${3:-a result} from $1, got ${got:-a result}" >&2
    exit 1
  fi
}

call describe_schema '{}'
call describe_schema '{"table":"orders"}'
call select_query '{"table":"orders","columns":["id","status","total"],"where":"status = $1 AND total > $2","params":["paid", 100],"order_by":"total desc","limit":5}'
# Pages: a truncated answer carries next_page; sent back as page_token (alone, or with the same
# arguments) it continues right after the last row, even if rows were added or removed meanwhile.
page=$(call select_query '{"table":"customers","columns":"id,name,country","order_by":"country","limit":3}')
echo "$page"
next=$(sed -n 's/.*"next_page":"\([^"]*\)".*/\1/p' <<<"$page")
call select_query '{"page_token":"'"$next"'"}'
call execute_sql '{"sql":"select status, count(*) as orders, sum(total) as revenue from orders group by status order by 2 desc"}'
# Mistakes answer with a category and a suggestion the model can act on:
call select_query '{"table":"order"}' invalid_table
call select_query '{"table":"orders","columns":"id,totl"}' invalid_column
# A write sent as a read: PostgreSQL refuses it inside the READ ONLY transaction.
call execute_sql '{"sql":"delete from orders"}' read_only_violation
