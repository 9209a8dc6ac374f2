#!/usr/bin/env bash
# Write-path examples against the demo (pgtools demo prints the values to export):
#   export PGTOOLS_URL=http://127.0.0.1:8080 PGTOOLS_TOKEN=...
#   bash examples/curl/write.sh
# It can run again and again (each run inserts a customer with an email of its own), and exits 1
# when an answer is not the one shown.
set -euo pipefail
: "${PGTOOLS_URL:?export PGTOOLS_URL (pgtools demo prints it)}"
: "${PGTOOLS_TOKEN:?export PGTOOLS_TOKEN (pgtools demo prints it)}"

call() { # call TOOL JSON [ERRORTYPE] — prints the answer and keeps it in $OUT; ERRORTYPE is the
  # error it must be, else it must be a result
  echo "--- $1 $2" >&2
  OUT=$(curl -sS -H "Authorization: Bearer $PGTOOLS_TOKEN" -H 'Content-Type: application/json' \
    -X POST "$PGTOOLS_URL/v1/tools/$1" -d "$2")
  echo "$OUT"
  local got
  got=$(field errorType)
  if [ "$got" != "${3:-}" ]; then
    echo "write.sh: expected ${3:-a result} from $1, got ${got:-a result}" >&2
    exit 1
  fi
}
field() { # field NAME — a top-level string field of $OUT
  sed -n "s/.*\"$1\":\"\\([^\"]*\\)\".*/\\1/p" <<<"$OUT"
}

# customers.email is unique: each run uses its own address.
EMAIL="ada-$(date +%s)-$RANDOM@example.com"

# Without stated intent nothing is written: write_intent_required shows both ways.
call insert_data "{\"table\":\"customers\",\"row\":{\"name\":\"Ada\",\"email\":\"$EMAIL\"}}" write_intent_required
# Autocommit: one statement in its own transaction; generated keys come back.
call insert_data "{\"table\":\"customers\",\"row\":{\"name\":\"Ada\",\"email\":\"$EMAIL\",\"country\":\"GB\"},\"autocommit\":true,\"returning\":\"id,name\"}"
# The same email again: the unique constraint refuses it, the value masked (constraint_violation).
call insert_data "{\"table\":\"customers\",\"row\":{\"name\":\"Ada\",\"email\":\"$EMAIL\"},\"autocommit\":true}" constraint_violation
# Upsert on the unique email.
call insert_data "{\"table\":\"customers\",\"row\":{\"name\":\"Ada Lovelace\",\"email\":\"$EMAIL\"},\"on_conflict\":{\"columns\":\"email\",\"action\":\"update\"},\"autocommit\":true}"
# How many rows would this touch? dry_run changes nothing.
call update_data '{"table":"orders","set":{"status":"cancelled"},"where":"status = $1 AND placed_at < $2","params":["pending","2025-06-01"],"dry_run":true}'
# Too broad: refused and rolled back (too_many_rows), with the real count.
call update_data '{"table":"orders","set":{"status":"cancelled"},"where":"true","autocommit":true}' too_many_rows
# Several statements, all or nothing.
call pg_transaction '{"operations":[
  {"sql":"update products set price = price * 1.1 where id = $1 returning id, price","params":[1]},
  {"sql":"insert into orders (customer_id, status, total) values ($1, $2, $3) returning id","params":[1,"pending","12.50"]}]}'
# A session: begin, write, read your own write, roll back.
call pg_tx '{"action":"begin"}'
S=$(field session_id)
call update_data "{\"table\":\"orders\",\"set\":{\"note\":\"checked\"},\"where\":\"id = \$1\",\"params\":[1],\"session_id\":\"$S\"}"
call select_query "{\"table\":\"orders\",\"columns\":\"id,note\",\"where\":\"id = 1\",\"session_id\":\"$S\"}"
call pg_tx '{"action":"list"}'
call pg_tx "{\"action\":\"rollback\",\"session_id\":\"$S\"}"
# DDL: the demo's least-privilege role may not create tables (permission_denied); a role that may
# would still see it rolled back unless the policy has allow_ddl and the token the ddl scope.
call execute_sql '{"sql":"create table scratch (i int)","mode":"write","autocommit":true}' permission_denied
