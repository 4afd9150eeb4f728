# Sourced by servers.sh and cluster.sh: which PostgreSQL server binaries to use.
# Debian 12 installs PostgreSQL 15 (/usr/lib/postgresql/15/bin), Debian 13 PostgreSQL 17.
#
# pg_bin DATA_DIR prints the folder holding pg_ctl, initdb, pg_basebackup:
#   1. OUTBOX_PG_BIN, if set;
#   2. else the binaries of the version that made DATA_DIR (its PG_VERSION), if installed:
#      a server keeps running with the binaries it was made with after a newer major
#      version is installed next to it;
#   3. else the highest installed /usr/lib/postgresql/*/bin that has pg_ctl.
# Prints nothing when no PostgreSQL server is installed.
pg_bin() {
  if [ -n "${OUTBOX_PG_BIN:-}" ]; then echo "$OUTBOX_PG_BIN"; return; fi
  local made_by d found=""
  made_by=$(cat "$1/PG_VERSION" 2>/dev/null || true)
  if [ -n "$made_by" ] && [ -x "/usr/lib/postgresql/$made_by/bin/pg_ctl" ]; then
    echo "/usr/lib/postgresql/$made_by/bin"; return
  fi
  for d in $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V); do
    if [ -x "$d/pg_ctl" ]; then found="$d"; fi
  done
  echo "$found"
}

# require_pg_bin BIN DATA_DIR: exits 1 with what to do when BIN has no pg_ctl, or when
# DATA_DIR was made by another major version than BIN's (the server would refuse it).
require_pg_bin() {
  local bin="$1" data="$2" made_by ours
  if [ -z "$bin" ] || [ ! -x "$bin/pg_ctl" ]; then
    echo "postgres: no server binaries (${bin:-/usr/lib/postgresql/*/bin}/pg_ctl): run deploy/local/install-deps.sh, or set OUTBOX_PG_BIN" >&2
    exit 1
  fi
  made_by=$(cat "$data/PG_VERSION" 2>/dev/null || true)
  ours=$("$bin/pg_ctl" --version | sed -n '1s/^[^0-9]*\([0-9][0-9]*\).*/\1/p')  # "pg_ctl (PostgreSQL) 17.6 (Debian ...)"
  if [ -n "$made_by" ] && [ "$made_by" != "$ours" ]; then
    echo "postgres: $data was made by PostgreSQL $made_by, $bin is PostgreSQL $ours: remove it to start afresh, or set OUTBOX_PG_BIN" >&2
    exit 1
  fi
}
