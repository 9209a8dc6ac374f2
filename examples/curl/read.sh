#!/usr/bin/env bash
# Read-path examples against a running runner (pgtools demo prints the values to export):
#   export PGTOOLS_URL=http://127.0.0.1:8080 PGTOOLS_TOKEN=...
#   bash examples/curl/read.sh
set -euo pipefail
: "${PGTOOLS_URL:?export PGTOOLS_URL (pgtools demo prints it)}"
: "${PGTOOLS_TOKEN:?export PGTOOLS_TOKEN (pgtools demo prints it)}"

call() { # call TOOL JSON
  echo "--- $1 $2"
  curl -sS -H "Authorization: Bearer $PGTOOLS_TOKEN" -H 'Content-Type: application/json' \
    -X POST "$PGTOOLS_URL/v1/tools/$1" -d "$2"
  echo
}

call describe_schema '{}'
call describe_schema '{"table":"orders"}'
call select_query '{"table":"orders","columns":["id","status","total"],"where":"status = $1 AND total > $2","params":["paid", 100],"order_by":"total desc","limit":5}'
call select_query '{"table":"customers","columns":"id,name,country","order_by":"id","limit":3,"offset":3}'
call execute_sql '{"sql":"select status, count(*) as orders, sum(total) as revenue from orders group by status order by 2 desc"}'
# Mistakes answer with a category and a suggestion the model can act on:
call select_query '{"table":"order"}'
call select_query '{"table":"orders","columns":"id,totl"}'
call execute_sql '{"sql":"delete from orders"}'
