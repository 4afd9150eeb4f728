#!/usr/bin/env bash
# Retention: batched DELETE (what the relay and `outbox-relay cleanup` do) against a
# time-partitioned outbox whose old partitions are dropped. Builds both in scratch
# schemas on the server of $OUTBOX_PG_DSN, prints the timings, drops the schemas.
#
#   bench/retention/partition_vs_delete.sh [ROWS_OLD] [ROWS_RECENT]   (default 1000000 100000)
#   OUTBOX_RELAY_BIN=build/relay/outbox-relay (for the batched DELETE)
set -euo pipefail
OLD=${1:-1000000}
RECENT=${2:-100000}
BIN=${OUTBOX_RELAY_BIN:-build/relay/outbox-relay}
: "${OUTBOX_PG_DSN:?source the env of deploy/local/servers.sh first}"
A=retention_bench_delete_$$
B=retention_bench_partition_$$
psql_q() { psql "$OUTBOX_PG_DSN" -v ON_ERROR_STOP=1 -qtAX "$@"; }
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
cleanup() { psql_q -c "DROP SCHEMA IF EXISTS $A CASCADE; DROP SCHEMA IF EXISTS $B CASCADE" >/dev/null 2>&1 || true; }
trap cleanup EXIT

cfg=$(mktemp --suffix=.yaml)
printf 'postgres:\n  dsn: ${OUTBOX_PG_DSN}\n  schema: %s\namqp:\n  uri: amqp://unused/\n' "$A" >"$cfg"
"$BIN" migrate --config "$cfg" >/dev/null

# The same rows in both: OLD published 10 days ago over 10 days, RECENT published now.
fill() { # fill TABLE
  psql_q -c "INSERT INTO $1 (message_id, exchange, routing_key, message_type, payload, created_at, published_at)
    SELECT gen_random_uuid(), 'orders', 'order.placed', 'OrderPlaced', convert_to(repeat('x', 300), 'UTF8'),
           now() - interval '20 days' + (g * interval '10 days' / $OLD), now() - interval '10 days'
    FROM generate_series(1, $OLD) g;
    INSERT INTO $1 (message_id, exchange, routing_key, message_type, payload, created_at, published_at)
    SELECT gen_random_uuid(), 'orders', 'order.placed', 'OrderPlaced', convert_to(repeat('x', 300), 'UTF8'), now(), now()
    FROM generate_series(1, $RECENT);"
}
fill "$A.outbox"
psql_q -c "VACUUM ANALYZE $A.outbox"

# A partitioned twin: the key must include created_at, so message_id is unique per
# partition only (a real loss: the outbox's UNIQUE(message_id) cannot be kept).
psql_q <<SQL
CREATE SCHEMA $B;
CREATE TABLE $B.outbox (LIKE $A.outbox INCLUDING DEFAULTS, PRIMARY KEY (id, created_at))
  PARTITION BY RANGE (created_at);
SELECT format('CREATE TABLE $B.outbox_d%s PARTITION OF $B.outbox FOR VALUES FROM (%L) TO (%L)',
              d, date_trunc('day', now()) - (d || ' days')::interval,
              date_trunc('day', now()) - ((d - 1) || ' days')::interval)
FROM generate_series(0, 21) d \gexec
CREATE INDEX ON $B.outbox (id) WHERE published_at IS NULL AND parked_at IS NULL;
SQL
psql_q -c "INSERT INTO $B.outbox SELECT * FROM $A.outbox"
psql_q -c "VACUUM ANALYZE $B.outbox"

t=$(date +%s%N)
"$BIN" cleanup --config "$cfg" --older-than 7d --batch 5000 --json >/tmp/retention_bench_$$.json
delete_ms=$(ms_since "$t")
t=$(date +%s%N)
psql_q -c "VACUUM $A.outbox"
vacuum_ms=$(ms_since "$t")

# Dropping a partition is only safe when it holds no pending or parked row: check, then drop.
t=$(date +%s%N)
psql_q <<SQL >/dev/null
SELECT format('DROP TABLE $B.%I', c.relname)
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = '$B.outbox'::regclass
  AND pg_get_expr(c.relpartbound, c.oid) ~ 'FROM'
  AND (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']+)''\)'))[1]::timestamptz
      <= now() - interval '7 days' \gexec
SQL
drop_ms=$(ms_since "$t")
left_a=$(psql_q -c "SELECT count(*) FROM $A.outbox")
left_b=$(psql_q -c "SELECT count(*) FROM $B.outbox WHERE published_at < now() - interval '7 days'")

echo "rows: $OLD published 10 days ago, $RECENT recent"
echo "batched DELETE (cleanup --batch 5000): $delete_ms ms ($(( OLD * 1000 / (delete_ms + 1) )) rows/s), then VACUUM $vacuum_ms ms; rows left $left_a"
echo "DROP of old daily partitions:          $drop_ms ms; old rows left $left_b"
rm -f "$cfg" /tmp/retention_bench_$$.json
