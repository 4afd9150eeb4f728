#!/usr/bin/env bash
# The main job: install, build, start the local servers, migrate, run the relay
# with the example order service and consumers (event-printer, billing-consumer),
# deliver some events twice on purpose, and print what happened.
#   ORDERS=500 DUPLICATES=20 BILLING_CONCURRENCY=8 BILLING_LATENCY_MS=200 deploy/local/demo.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ORDERS="${ORDERS:-500}"
ROLLBACK_EVERY="${ROLLBACK_EVERY:-10}"
DUPLICATES="${DUPLICATES:-20}"
BILLING_CONCURRENCY="${BILLING_CONCURRENCY:-8}"
BILLING_LATENCY_MS="${BILLING_LATENCY_MS:-200}"
install_and_build demo
start_servers
BIN="$BUILD_DIR"
CONFIG="$REPO/deploy/local/relay.yaml"

step "Migrating the outbox schema"
"$BIN/relay/outbox-relay" migrate --config "$CONFIG"

step "Declaring the example topology (exchange 'orders' -> queues 'order-events' and 'billing.order-placed')"
"$BIN/examples/event-printer" --declare
"$BIN/examples/billing/billing-consumer" --declare
for queue in order-events billing.order-placed; do  # nothing left over from an earlier run
  bash "$SERVERS" rabbitmqctl purge_queue "$queue" >/dev/null
done
psql "$OUTBOX_PG_DSN" -qAt -c "TRUNCATE outbox.outbox" 2>/dev/null || true
psql "$OUTBOX_PG_DSN" -qAt -c "TRUNCATE shop.orders" 2>/dev/null || true
psql "$OUTBOX_PG_DSN" -qAt -c "TRUNCATE outbox.outbox_subject_keys" 2>/dev/null || true

step "Starting the relay"
RELAY_LOG="$OUTBOX_LOCAL_DIR/relay-demo.log"
"$BIN/relay/outbox-relay" run --config "$CONFIG" 2>"$RELAY_LOG" &
RELAY_PID=$!
trap 'kill -TERM $RELAY_PID 2>/dev/null || true; wait $RELAY_PID 2>/dev/null || true
      [ "$STOP_SERVERS_AT_EXIT" = 1 ] && bash "$SERVERS" stop' EXIT

step "Writing $ORDERS orders (every ${ROLLBACK_EVERY}th rolled back on purpose)"
"$BIN/examples/order-service" --orders "$ORDERS" --rollback-every "$ROLLBACK_EVERY"
COMMITTED=$(psql "$OUTBOX_PG_DSN" -qAt -c "SELECT count(*) FROM shop.orders")
wait_until_published() {
  local pending
  for _ in $(seq 1 600); do
    pending=$(psql "$OUTBOX_PG_DSN" -qAt -c \
      "SELECT count(*) FROM outbox.outbox WHERE published_at IS NULL AND parked_at IS NULL")
    [ "$pending" = 0 ] && return 0
    sleep 0.1
  done
  echo "  the relay left $pending rows pending for 60 s (see $RELAY_LOG)"; exit 1
}
wait_until_published

step "Delivering $DUPLICATES events twice on purpose (as after a relay that died between the broker's ack and its commit)"
psql "$OUTBOX_PG_DSN" -qAt -c "UPDATE outbox.outbox SET published_at = NULL WHERE id IN \
  (SELECT id FROM outbox.outbox WHERE published_at IS NOT NULL ORDER BY id LIMIT $DUPLICATES)" >/dev/null
wait_until_published
echo "  the relay published $DUPLICATES rows again, with the same message ids"

step "Consuming OrderPlaced events from queue 'order-events'"
"$BIN/examples/event-printer" --idle-ms 3000 | tee "$OUTBOX_LOCAL_DIR/consumer-demo.out"

step "Billing: one invoice and one charge per order from queue 'billing.order-placed' ($BILLING_CONCURRENCY workers, gateway ${BILLING_LATENCY_MS} ms)"
BILLING_LOG="$OUTBOX_LOCAL_DIR/billing-demo.log"
"$BIN/examples/billing/billing-consumer" --concurrency "$BILLING_CONCURRENCY" \
  --gateway-latency-ms "$BILLING_LATENCY_MS" --exit-when-idle-ms 3000 2>"$BILLING_LOG" \
  | tee "$OUTBOX_LOCAL_DIR/billing-demo.out" || { tail -n 20 "$BILLING_LOG"; exit 1; }

step "Stopping the relay (SIGTERM: finishes its batch, exits 0)"
kill -TERM $RELAY_PID; wait $RELAY_PID && echo "relay exited 0"
tail -n 3 "$RELAY_LOG"

step "Summary"
read -r PUBLISHED PENDING PARKED < <(psql "$OUTBOX_PG_DSN" -qAt -F ' ' -c \
  "SELECT count(*) FILTER (WHERE published_at IS NOT NULL), count(*) FILTER (WHERE published_at IS NULL AND parked_at IS NULL), count(*) FILTER (WHERE parked_at IS NOT NULL) FROM outbox.outbox")
DISTINCT=$(grep -o '[0-9]* distinct' "$OUTBOX_LOCAL_DIR/consumer-demo.out" | cut -d' ' -f1)
billing_figure() { grep -o "$1 [0-9]*" "$OUTBOX_LOCAL_DIR/billing-demo.out" | grep -o '[0-9]*$' || echo "?"; }
INVOICES=$(billing_figure "invoices created")
SKIPPED=$(billing_figure "duplicates skipped")  # at least the copies sent twice above
CHARGES=$(billing_figure "charges taken")
printf '  orders written (committed): %s\n  events published:           %s\n  rows pending:               %s\n  rows parked:                %s\n  distinct events consumed:   %s\n' \
  "$COMMITTED" "$PUBLISHED" "$PENDING" "$PARKED" "$DISTINCT"
printf '  events delivered twice:     %s\n  invoices created:           %s\n  duplicates skipped:         %s\n  charges taken:              %s\n' \
  "$DUPLICATES" "$INVOICES" "$SKIPPED" "$CHARGES"
if [ "$PUBLISHED" = "$COMMITTED" ] && [ "$DISTINCT" = "$COMMITTED" ] && [ "$PENDING" = 0 ]; then
  echo "  result: every committed order's event was published and consumed; none from rolled-back orders"
else
  echo "  result: MISMATCH (see $RELAY_LOG)"; exit 1
fi
if [ "$INVOICES" = "$COMMITTED" ] && [ "$CHARGES" = "$COMMITTED" ] && [ "$SKIPPED" -ge "$DUPLICATES" ]; then
  echo "  result: one invoice and one charge per order; every copy delivered twice was skipped by the inbox"
else
  echo "  result: BILLING MISMATCH (see $BILLING_LOG)"; exit 1
fi
