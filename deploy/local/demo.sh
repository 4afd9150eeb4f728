#!/usr/bin/env bash
# The main job: install, build, start the local servers, migrate, run the relay
# with the example order service and consumer, and print what happened.
#   ORDERS=500 deploy/local/demo.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ORDERS="${ORDERS:-500}"
ROLLBACK_EVERY="${ROLLBACK_EVERY:-10}"
install_and_build
start_servers
BIN="$BUILD_DIR"
CONFIG="$REPO/deploy/local/relay.yaml"

step "Migrating the outbox schema"
"$BIN/relay/outbox-relay" migrate --config "$CONFIG"

step "Declaring the example topology (exchange 'orders' -> queue 'order-events')"
"$BIN/examples/event-printer" --declare
psql "$OUTBOX_PG_DSN" -qAt -c "TRUNCATE outbox.outbox" 2>/dev/null || true
psql "$OUTBOX_PG_DSN" -qAt -c "TRUNCATE shop.orders" 2>/dev/null || true

step "Starting the relay"
RELAY_LOG="$OUTBOX_LOCAL_DIR/relay-demo.log"
"$BIN/relay/outbox-relay" run --config "$CONFIG" 2>"$RELAY_LOG" &
RELAY_PID=$!
trap 'kill -TERM $RELAY_PID 2>/dev/null || true; wait $RELAY_PID 2>/dev/null || true; "$SERVERS" stop' EXIT
[ "${OUTBOX_KEEP_SERVERS:-0}" = 1 ] && trap 'kill -TERM $RELAY_PID 2>/dev/null || true; wait $RELAY_PID 2>/dev/null || true' EXIT

step "Writing $ORDERS orders (every ${ROLLBACK_EVERY}th rolled back on purpose)"
"$BIN/examples/order-service" --orders "$ORDERS" --rollback-every "$ROLLBACK_EVERY"
COMMITTED=$(psql "$OUTBOX_PG_DSN" -qAt -c "SELECT count(*) FROM shop.orders")

step "Consuming OrderPlaced events from queue 'order-events'"
"$BIN/examples/event-printer" --expect "$COMMITTED" --idle-ms 10000 | tee "$OUTBOX_LOCAL_DIR/consumer-demo.out"

step "Stopping the relay (SIGTERM: finishes its batch, exits 0)"
kill -TERM $RELAY_PID; wait $RELAY_PID && echo "relay exited 0"
tail -n 3 "$RELAY_LOG"

step "Summary"
read -r PUBLISHED PENDING PARKED < <(psql "$OUTBOX_PG_DSN" -qAt -F ' ' -c \
  "SELECT count(*) FILTER (WHERE published_at IS NOT NULL), count(*) FILTER (WHERE published_at IS NULL AND parked_at IS NULL), count(*) FILTER (WHERE parked_at IS NOT NULL) FROM outbox.outbox")
DISTINCT=$(grep -o '[0-9]* distinct' "$OUTBOX_LOCAL_DIR/consumer-demo.out" | cut -d' ' -f1)
printf '  orders written (committed): %s\n  events published:           %s\n  rows pending:               %s\n  rows parked:                %s\n  distinct events consumed:   %s\n' \
  "$COMMITTED" "$PUBLISHED" "$PENDING" "$PARKED" "$DISTINCT"
if [ "$PUBLISHED" = "$COMMITTED" ] && [ "$DISTINCT" = "$COMMITTED" ] && [ "$PENDING" = 0 ]; then
  echo "  result: every committed order's event was published and consumed; none from rolled-back orders"
else
  echo "  result: MISMATCH (see $RELAY_LOG)"; exit 1
fi
