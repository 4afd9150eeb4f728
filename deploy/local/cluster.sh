#!/usr/bin/env bash
# A 3-node RabbitMQ cluster and a PostgreSQL primary with one streaming standby, all
# on loopback and private ports, with all their state in one folder of their own.
# For cluster tests (quorum queues, node failover, database failover); run as root,
# no systemd needed. The shared servers of servers.sh are never touched.
#
#   deploy/local/cluster.sh start          # waits until the cluster and both PostgreSQL servers answer
#   deploy/local/cluster.sh stop           # stops everything start started, by pid, removes nothing
#   deploy/local/cluster.sh status | env   # env: connection settings as shell exports
# Faults (for tests):
#   deploy/local/cluster.sh kill-node N    # SIGKILL of node N's Erlang VM (N = 1, 2, 3)
#   deploy/local/cluster.sh stop-node N    # a clean stop of node N
#   deploy/local/cluster.sh start-node N   # starts node N again; it rejoins the cluster
#   deploy/local/cluster.sh node-pid N
#   deploy/local/cluster.sh pg-failover    # immediate stop of the primary, promote the standby
#   deploy/local/cluster.sh rabbitmqctl N ARGS...
#
# Settings (environment): OUTBOX_CLUSTER_DIR (default /tmp/outbox-relay-cluster),
# OUTBOX_CLUSTER_AMQP_PORT (default 36672: nodes use it, +1 and +2; each node's Erlang
# distribution port is its AMQP port + 20000, so keep it below 45533),
# OUTBOX_CLUSTER_PG_PORT (default 36432: primary; the standby uses +1),
# OUTBOX_CLUSTER_PG_SYNC (default 1: synchronous replication; 0: asynchronous, where a
# failover may lose the last commits, see docs/OPERATIONS.md),
# OUTBOX_PG_BIN (PostgreSQL's server binaries; default: those that made the primary's
# folder, else the highest installed /usr/lib/postgresql/*/bin; see pg-bin.sh).
set -euo pipefail

DIR="${OUTBOX_CLUSTER_DIR:-/tmp/outbox-relay-cluster}"
AMQP_BASE="${OUTBOX_CLUSTER_AMQP_PORT:-36672}"
PG_BASE="${OUTBOX_CLUSTER_PG_PORT:-36432}"
SYNC="${OUTBOX_CLUSTER_PG_SYNC:-1}"
# pg_bin, require_pg_bin: which PostgreSQL binaries (OUTBOX_PG_BIN, see pg-bin.sh).
source "$(dirname "${BASH_SOURCE[0]}")/pg-bin.sh"
PG_BIN="$(pg_bin "$DIR/pg-a")"
RMQ_BIN=/usr/lib/rabbitmq/bin
NODES=(1 2 3)

as_user() { # as_user USER COMMAND...: run COMMAND as USER, keeping this script's environment
  local user="$1"; shift
  if [ "$(id -un)" = "$user" ]; then "$@"; else
    su "$user" -s /bin/sh -c "$(printf '%q ' "$@")"; fi
}

node_port() { echo $((AMQP_BASE + $1 - 1)); }
# The port is in the name: two clusters (or servers.sh's node) on one host never clash.
node_name() { echo "outbox$(node_port "$1")@localhost"; }
node_dir() { echo "$DIR/rabbit$1"; }

rmq_env() { # rmq_env N COMMAND...: run COMMAND with node N's settings
  local n="$1"; shift
  local d; d=$(node_dir "$n")
  ( export HOME=/var/lib/rabbitmq \
    RABBITMQ_NODENAME="$(node_name "$n")" RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
    RABBITMQ_NODE_PORT="$(node_port "$n")" RABBITMQ_DIST_PORT="$(($(node_port "$n") + 20000))" \
    RABBITMQ_MNESIA_BASE="$d/mnesia" RABBITMQ_LOG_BASE="$d/log" RABBITMQ_PID_FILE="$d/pid" \
    RABBITMQ_ENABLED_PLUGINS_FILE="$d/enabled_plugins" RABBITMQ_CONFIG_FILE="$d/rabbitmq"
    "$@" )
}

rmqctl() { local n="$1"; shift; rmq_env "$n" as_user rabbitmq "$RMQ_BIN/rabbitmqctl" -n "$(node_name "$n")" "$@"; }
node_pid() { cat "$(node_dir "$1")/pid" 2>/dev/null || true; }
node_running() { # by the pid file, and the pid must still be an Erlang VM (not a reused pid)
  local p; p=$(node_pid "$1")
  [ -n "$p" ] && kill -0 "$p" 2>/dev/null && tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q beam
}

launch_node() { # launch_node N: starts the VM detached; does not wait
  local n="$1" d; d=$(node_dir "$1")
  mkdir -p "$d/mnesia" "$d/log"
  echo "[]." >"$d/enabled_plugins"
  printf 'loopback_users.guest = false\nvm_memory_high_watermark.relative = 0.3\n' >"$d/rabbitmq.conf"
  chown -R rabbitmq:rabbitmq "$d"
  rm -f "$d/pid"
  rmq_env "$n" as_user rabbitmq "$RMQ_BIN/rabbitmq-server" -detached >/dev/null 2>&1
}

await_node() { # await_node N: until the node boots (or fails)
  local n="$1" d; d=$(node_dir "$1")
  for _ in $(seq 1 60); do [ -s "$d/pid" ] && break; sleep 0.5; done
  rmqctl "$n" -q await_startup --timeout 90 >/dev/null 2>&1 && node_running "$n" && return
  echo "rabbitmq node $n did not start; log follows" >&2
  tail -n 30 "$d"/log/*.log >&2 || true
  return 1
}

start_node() { # start_node N: starts node N again after stop-node/kill-node; it rejoins by itself
  if node_running "$1"; then echo "rabbitmq node $1: already running"; return; fi
  launch_node "$1"; await_node "$1"
  echo "rabbitmq node $1: started on 127.0.0.1:$(node_port "$1") (pid $(node_pid "$1"))"
}

start_rabbitmq() {
  local n fresh=0
  [ -d "$(node_dir 1)/mnesia" ] || fresh=1
  for n in "${NODES[@]}"; do node_running "$n" || launch_node "$n"; done
  for n in "${NODES[@]}"; do await_node "$n"; done
  if [ "$fresh" = 1 ]; then
    for n in 2 3; do
      rmqctl "$n" -q stop_app >/dev/null
      rmqctl "$n" -q join_cluster "$(node_name 1)" >/dev/null 2>>"$DIR/join.log"  # 3.10 logs harmless errors here
      rmqctl "$n" -q start_app >/dev/null
    done
  fi
  echo "rabbitmq: cluster of 3 on 127.0.0.1:$(node_port 1),$(node_port 2),$(node_port 3)"
}

stop_node() { # stop_node N [SIGNAL]: by pid; waits until the VM is gone
  local p; p=$(node_pid "$1")
  if [ -n "$p" ] && node_running "$1"; then
    kill "-${2:-TERM}" "$p"
    for _ in $(seq 1 60); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$p" 2>/dev/null || true
    echo "rabbitmq node $1: stopped (pid $p, SIG${2:-TERM})"
  else echo "rabbitmq node $1: not running"; fi
  rm -f "$(node_dir "$1")/pid"
}

pg_ctl() { local data="$1"; shift; as_user postgres "$PG_BIN/pg_ctl" -D "$data" "$@"; }
pg_running() { pg_ctl "$1" status >/dev/null 2>&1; }
pg_start() { # pg_start DATA PORT
  pg_ctl "$1" -l "$1/server.log" -w -t 60 -o "-p $2 -k $DIR -c listen_addresses=127.0.0.1" start >/dev/null
}

start_postgres() {
  local primary="$DIR/pg-a" standby="$DIR/pg-b"
  require_pg_bin "$PG_BIN" "$primary"
  if [ ! -f "$primary/PG_VERSION" ]; then
    mkdir -p "$primary"; chown postgres:postgres "$DIR" "$primary"; chmod 700 "$primary"
    # UTF8 whatever the caller's locale: a container without LANG makes SQL_ASCII, which
    # takes invalid UTF-8 and cannot convert what the SQL contract's errors quote.
    as_user postgres "$PG_BIN/initdb" -D "$primary" -A trust -U postgres --encoding=UTF8 --locale=C.UTF-8 >"$DIR/initdb.log" 2>&1 \
      || { cat "$DIR/initdb.log"; exit 1; }
    cat >>"$primary/postgresql.conf" <<CONF
max_connections = 100
wal_level = replica
max_wal_senders = 5
hot_standby = on
log_min_messages = warning
CONF
    echo "host replication all 127.0.0.1/32 trust" >>"$primary/pg_hba.conf"
  fi
  pg_running "$primary" || pg_start "$primary" "$PG_BASE"
  if [ ! -f "$standby/PG_VERSION" ]; then
    as_user postgres "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$PG_BASE" -U postgres -D "$standby" -R -X stream
    chmod 700 "$standby"
  fi
  pg_running "$standby" || pg_start "$standby" "$((PG_BASE + 1))"
  # Synchronous: a commit is visible (and acknowledged) only once the standby has its
  # WAL, so a failover loses no committed transaction and the relay never publishes
  # the event of one that a failover then erases. Set on the primary only (after the
  # base backup): the promoted standby must not wait for a standby it does not have.
  local sync=off
  if [ "$SYNC" = 1 ]; then
    as_user postgres "$PG_BIN/psql" -q -h 127.0.0.1 -p "$PG_BASE" -U postgres -d postgres \
      -c "ALTER SYSTEM SET synchronous_standby_names = '*'" -c "SELECT pg_reload_conf()" >/dev/null
    sync=on
  fi
  echo "postgres: primary on 127.0.0.1:$PG_BASE, streaming standby on 127.0.0.1:$((PG_BASE + 1)) (synchronous: $sync)"
}

stop_postgres() {
  local data
  for data in "$DIR/pg-a" "$DIR/pg-b"; do
    if [ -f "$data/PG_VERSION" ] && pg_running "$data"; then
      pg_ctl "$data" -m immediate -w stop >/dev/null; echo "postgres $(basename "$data"): stopped"; fi
  done
}

# The server that is not in recovery is the primary; the other one is promoted.
pg_failover() {
  local a="$DIR/pg-a" b="$DIR/pg-b" old new
  if [ -f "$a/standby.signal" ]; then old="$b"; new="$a"; else old="$a"; new="$b"; fi
  pg_ctl "$old" -m immediate -w stop >/dev/null
  pg_ctl "$new" -w -t 60 promote >/dev/null
  echo "postgres: $(basename "$old") stopped (immediate), $(basename "$new") promoted"
}

print_env() {
  cat <<ENV
export OUTBOX_CLUSTER_DIR='$DIR'
export OUTBOX_PG_DSN='host=127.0.0.1,127.0.0.1 port=$PG_BASE,$((PG_BASE + 1)) user=postgres dbname=postgres target_session_attrs=read-write'
export OUTBOX_AMQP_URIS='amqp://guest:guest@127.0.0.1:$(node_port 1)/%2f amqp://guest:guest@127.0.0.1:$(node_port 2)/%2f amqp://guest:guest@127.0.0.1:$(node_port 3)/%2f'
export OUTBOX_AMQP_URI='amqp://guest:guest@127.0.0.1:$(node_port 1)/%2f'
ENV
}

check_node_arg() { case "${1:-}" in 1|2|3) ;; *) echo "node must be 1, 2 or 3, got '${1:-}'" >&2; exit 2 ;; esac; }

cmd="${1:-status}"
case "$cmd" in
  start)
    mkdir -p "$DIR"; chmod 755 "$DIR"
    start_postgres; start_rabbitmq
    print_env >"$DIR/env.sh"; echo "connection settings (also in $DIR/env.sh):"; print_env ;;
  stop) for n in "${NODES[@]}"; do stop_node "$n"; done; stop_postgres ;;
  status)
    for n in "${NODES[@]}"; do
      node_running "$n" && echo "rabbitmq node $n: running on 127.0.0.1:$(node_port "$n") (pid $(node_pid "$n"))" \
        || echo "rabbitmq node $n: stopped"; done
    for data in "$DIR/pg-a" "$DIR/pg-b"; do
      if pg_running "$data"; then
        [ -f "$data/standby.signal" ] && role=standby || role=primary
        echo "postgres $(basename "$data"): running ($role)"
      else echo "postgres $(basename "$data"): stopped"; fi
    done ;;
  env) print_env ;;
  kill-node) check_node_arg "${2:-}"; stop_node "$2" KILL ;;
  stop-node) check_node_arg "${2:-}"; stop_node "$2" TERM ;;
  start-node) check_node_arg "${2:-}"; start_node "$2" ;;
  node-pid) check_node_arg "${2:-}"; node_pid "$2" ;;
  pg-failover) pg_failover ;;
  rabbitmqctl) check_node_arg "${2:-}"; n="$2"; shift 2; rmqctl "$n" "$@" ;;
  *) echo "usage: $0 start|stop|status|env|kill-node N|stop-node N|start-node N|node-pid N|pg-failover|rabbitmqctl N ARGS..." >&2
     exit 2 ;;
esac
