#!/bin/sh
# The official postgres image's first start, as far as docker-compose.yml needs it: a
# cluster in $PGDATA whose superuser is $POSTGRES_USER with the password in
# $POSTGRES_PASSWORD_FILE, the database $POSTGRES_DB, password logins from the network.
set -eu
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
if [ "${1:-}" != postgres ]; then exec "$@"; fi
mkdir -p "$PGDATA" /run/postgresql
chown postgres:postgres "$PGDATA" /run/postgresql
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  cat "$POSTGRES_PASSWORD_FILE" > "$pwfile"
  chown postgres "$pwfile"
  as_postgres initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  echo "listen_addresses = '*'" >> "$PGDATA/postgresql.conf"
  as_postgres pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
  if [ "$POSTGRES_DB" != "$POSTGRES_USER" ]; then
    as_postgres createdb -U "$POSTGRES_USER" "$POSTGRES_DB"
  fi
  as_postgres pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  echo "docker-entrypoint.sh: database $POSTGRES_DB created"
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups "$@"
