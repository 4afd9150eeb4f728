#!/usr/bin/env bash
# Starts, stops and reports a private PostgreSQL and RabbitMQ on loopback, on
# non-default ports, with all their state in one folder of their own. Debian 12
# (PostgreSQL 15, RabbitMQ 3.10) and Debian 13 (PostgreSQL 17, RabbitMQ 4.0) alike.
#
#   deploy/local/servers.sh start    # idempotent; waits until both accept clients
#   deploy/local/servers.sh stop     # stops what start started, by pid
#   deploy/local/servers.sh status
#   deploy/local/servers.sh env      # prints the connection settings as shell exports
#   deploy/local/servers.sh restart-rabbitmq | restart-postgres | rabbitmq-pid
#                                    # for fault-injection runs (tests/chaos) on private servers
#
# Settings (environment): OUTBOX_LOCAL_DIR (default /tmp/outbox-relay-local),
# OUTBOX_PG_PORT (default 35432), OUTBOX_AMQP_PORT (default 35673; its Erlang
# distribution port is this + 20000, so keep it below 45536).
# OUTBOX_PG_BIN: the PostgreSQL server binaries (the folder holding pg_ctl and initdb);
# by default those of the version that made the data folder, if there is one and that
# version is installed, else the highest installed /usr/lib/postgresql/*/bin.
# TLS (off by default): OUTBOX_TLS_DIR names a folder with ca.crt, server.crt and
# server.key (PEM); PostgreSQL then also accepts TLS on its port (ssl = on) and
# RabbitMQ listens for amqps:// on OUTBOX_AMQPS_PORT (default the AMQP port + 1).
# The shared servers run without it; TLS tests start private servers with it.
# OUTBOX_RABBITMQ_CONF: more rabbitmq.conf lines for the node (separated by newlines or
# ';'), read at boot, e.g. 'max_message_size = 65536': RabbitMQ 4.0 reads settings such
# as this one only at boot (application:set_env on the running node changes nothing
# there; 3.x read it at each new channel).
set -euo pipefail

DIR="${OUTBOX_LOCAL_DIR:-/tmp/outbox-relay-local}"
case "$DIR" in /*) ;; *) DIR="$PWD/$DIR" ;; esac  # as_user runs from /
PG_PORT="${OUTBOX_PG_PORT:-35432}"
AMQP_PORT="${OUTBOX_AMQP_PORT:-35673}"
TLS_DIR="${OUTBOX_TLS_DIR:-}"
AMQPS_PORT="${OUTBOX_AMQPS_PORT:-$((AMQP_PORT + 1))}"
RMQ_CONF="${OUTBOX_RABBITMQ_CONF:-}"
PG_DIR="$DIR/pg"
RMQ_DIR="$DIR/rabbitmq"
RMQ_NODE="outbox${AMQP_PORT}@localhost"

# From /: the server users may not enter the caller's folder (a clone under /root).
as_user() { # as_user USER COMMAND...: run COMMAND as USER, keeping this script's environment
  local user="$1"; shift
  if [ "$(id -un)" = "$user" ]; then "$@"; else
    su "$user" -s /bin/sh -c "cd / && $(printf '%q ' "$@")"; fi
}

# pg_bin, require_pg_bin: which PostgreSQL binaries (OUTBOX_PG_BIN, see pg-bin.sh).
source "$(dirname "${BASH_SOURCE[0]}")/pg-bin.sh"
PG_BIN="$(pg_bin "$PG_DIR")"

rmq_env() { # rmq_env COMMAND...: run COMMAND (a function too) with the node's settings
  ( export HOME=/var/lib/rabbitmq \
    RABBITMQ_NODENAME="$RMQ_NODE" RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
    RABBITMQ_NODE_PORT="$AMQP_PORT" RABBITMQ_DIST_PORT="$((AMQP_PORT + 20000))" \
    RABBITMQ_MNESIA_BASE="$RMQ_DIR/mnesia" RABBITMQ_LOG_BASE="$RMQ_DIR/log" \
    RABBITMQ_PID_FILE="$RMQ_DIR/rabbitmq.pid" \
    RABBITMQ_ENABLED_PLUGINS_FILE="$RMQ_DIR/enabled_plugins" \
    RABBITMQ_CONFIG_FILE="$RMQ_DIR/rabbitmq"
    "$@" )
}

pg_running() { as_user postgres "$PG_BIN/pg_ctl" -D "$PG_DIR" status >/dev/null 2>&1; }
rmq_pid() { cat "$RMQ_DIR/rabbitmq.pid" 2>/dev/null || true; }
rmq_running() { # by the pid file, and the pid must still be an Erlang VM (not a reused pid)
  local p; p=$(rmq_pid)
  [ -n "$p" ] && kill -0 "$p" 2>/dev/null && tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q beam
}

start_pg() {
  if pg_running; then echo "postgres: already running on 127.0.0.1:$PG_PORT"; return; fi
  require_pg_bin "$PG_BIN" "$PG_DIR"
  mkdir -p "$PG_DIR"; chown postgres:postgres "$PG_DIR"; chmod 700 "$PG_DIR"
  if [ ! -f "$PG_DIR/PG_VERSION" ]; then
    # UTF8 whatever the caller's locale: a container without LANG makes SQL_ASCII, which
    # takes invalid UTF-8 and cannot convert what the SQL contract's errors quote.
    as_user postgres "$PG_BIN/initdb" -D "$PG_DIR" -A trust -U postgres --encoding=UTF8 --locale=C.UTF-8 >"$DIR/initdb.log" 2>&1 \
      || { cat "$DIR/initdb.log"; exit 1; }
    cat >>"$PG_DIR/postgresql.conf" <<CONF
max_connections = 300
shared_buffers = 256MB
log_min_messages = warning
CONF
  fi
  if [ -n "$TLS_DIR" ]; then  # the key must belong to the server's user, mode 0600
    install -o postgres -g postgres -m 600 "$TLS_DIR/server.crt" "$TLS_DIR/server.key" "$PG_DIR/"
    grep -q "^ssl = on" "$PG_DIR/postgresql.conf" ||
      printf "ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n" >>"$PG_DIR/postgresql.conf"
  fi
  as_user postgres "$PG_BIN/pg_ctl" -D "$PG_DIR" -l "$PG_DIR/server.log" -w -t 60 \
    -o "-p $PG_PORT -k $PG_DIR -c listen_addresses=127.0.0.1" start >/dev/null
  echo "postgres: started on 127.0.0.1:$PG_PORT (pid $(head -1 "$PG_DIR/postmaster.pid"), $PG_BIN)"
}

rmqctl() { rmq_env as_user rabbitmq /usr/lib/rabbitmq/bin/rabbitmqctl -n "$RMQ_NODE" "$@"; }

# A node of this name that answers although its pid file is gone (removed by hand, or
# a folder shared with an earlier run): adopt it, so that stop can still find it.
adopt_running_rmq() {
  rmqctl -q ping >/dev/null 2>&1 || return 1
  local p
  p=$(rmqctl -q eval 'list_to_integer(os:getpid()).' 2>/dev/null | tr -dc 0-9)
  [ -n "$p" ] && kill -0 "$p" 2>/dev/null || return 1
  echo "$p" >"$RMQ_DIR/rabbitmq.pid"
}

start_rmq() {
  if rmq_running || adopt_running_rmq; then
    echo "rabbitmq: already running on 127.0.0.1:$AMQP_PORT (pid $(rmq_pid))"; return; fi
  local attempt
  for attempt in 1 2; do
    launch_rmq && { echo "rabbitmq: started on 127.0.0.1:$AMQP_PORT (pid $(rmq_pid))"; return; }
    # A node of the same name still shutting down holds the name for a few seconds.
    echo "rabbitmq: start attempt $attempt failed" >&2
    stop_rmq >/dev/null 2>&1 || true
    sleep 5
  done
  echo "rabbitmq: did not start; log follows" >&2
  tail -n 40 "$RMQ_DIR"/log/*.log >&2 || true
  exit 1
}

launch_rmq() {
  mkdir -p "$RMQ_DIR/mnesia" "$RMQ_DIR/log"
  echo "[]." >"$RMQ_DIR/enabled_plugins"
  # Generous watermark: benchmarks push many persistent messages through a small machine.
  printf 'loopback_users.guest = false\nvm_memory_high_watermark.relative = 0.6\n' >"$RMQ_DIR/rabbitmq.conf"
  if [ -n "$RMQ_CONF" ]; then printf '%s\n' "$RMQ_CONF" | tr ';' '\n' | sed 's/^ *//' >>"$RMQ_DIR/rabbitmq.conf"; fi
  if [ -n "$TLS_DIR" ]; then
    mkdir -p "$RMQ_DIR/tls"
    cp "$TLS_DIR/ca.crt" "$TLS_DIR/server.crt" "$TLS_DIR/server.key" "$RMQ_DIR/tls/"
    cat >>"$RMQ_DIR/rabbitmq.conf" <<CONF
listeners.ssl.default = $AMQPS_PORT
ssl_options.cacertfile = $RMQ_DIR/tls/ca.crt
ssl_options.certfile = $RMQ_DIR/tls/server.crt
ssl_options.keyfile = $RMQ_DIR/tls/server.key
ssl_options.verify = verify_none
ssl_options.fail_if_no_peer_cert = false
CONF
  fi
  chown -R rabbitmq:rabbitmq "$RMQ_DIR"
  rm -f "$RMQ_DIR/rabbitmq.pid"
  rmq_env as_user rabbitmq /usr/lib/rabbitmq/bin/rabbitmq-server -detached >/dev/null 2>&1
  for _ in $(seq 1 60); do [ -s "$RMQ_DIR/rabbitmq.pid" ] && break; sleep 0.5; done
  rmqctl -q await_startup --timeout 90 >/dev/null 2>&1 && rmq_running
}

stop_pg() {
  if pg_running; then as_user postgres "$PG_BIN/pg_ctl" -D "$PG_DIR" -m fast -w stop >/dev/null
    echo "postgres: stopped"; else echo "postgres: not running"; fi
}

stop_rmq() {
  local p; p=$(rmq_pid)
  if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
    kill "$p"
    for _ in $(seq 1 60); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$p" 2>/dev/null || true
    rm -f "$RMQ_DIR/rabbitmq.pid"
    echo "rabbitmq: stopped (pid $p)"
  else echo "rabbitmq: not running"; fi
}

print_env() {
  cat <<ENV
export OUTBOX_LOCAL_DIR='$DIR'
export OUTBOX_PG_DSN='host=127.0.0.1 port=$PG_PORT user=postgres dbname=postgres'
export OUTBOX_AMQP_URI='amqp://guest:guest@127.0.0.1:$AMQP_PORT/%2f'
export OUTBOX_RABBITMQ_NODE='$RMQ_NODE'
ENV
  if [ -n "$TLS_DIR" ]; then
    echo "export OUTBOX_AMQPS_URI='amqps://guest:guest@localhost:$AMQPS_PORT/%2f'"
    echo "export OUTBOX_TLS_CA='$TLS_DIR/ca.crt'"
  fi
}

cmd="${1:-status}"
case "$cmd" in
  start)
    mkdir -p "$DIR"; chmod 755 "$DIR"
    start_pg; start_rmq
    print_env >"$DIR/env.sh"
    echo "connection settings (also in $DIR/env.sh):"; print_env ;;
  stop) stop_rmq; stop_pg ;;
  # For fault-injection suites on their own servers (never the shared ones):
  restart-rabbitmq) stop_rmq; start_rmq ;;
  restart-postgres) as_user postgres "$PG_BIN/pg_ctl" -D "$PG_DIR" -m fast -w -t 60 \
      -o "-p $PG_PORT -k $PG_DIR -c listen_addresses=127.0.0.1" restart >/dev/null
    echo "postgres: restarted on 127.0.0.1:$PG_PORT" ;;
  rabbitmq-pid) rmq_pid ;;
  status)
    pg_running && echo "postgres: running on 127.0.0.1:$PG_PORT" || echo "postgres: stopped"
    rmq_running && echo "rabbitmq: running on 127.0.0.1:$AMQP_PORT (pid $(rmq_pid))" || echo "rabbitmq: stopped" ;;
  env) print_env ;;
  rabbitmqctl) shift; rmqctl "$@" ;;
  *) echo "usage: $0 start|stop|status|env|restart-rabbitmq|restart-postgres|rabbitmq-pid|rabbitmqctl ARGS..." >&2; exit 2 ;;
esac
