#!/usr/bin/env bash
# CI: PostgreSQL for PostgresStore's tests. Makes sure the PostgreSQL binaries are there
# (the outage tests start private servers with initdb/pg_ctl), that a server answers at
# IDEMPOTENT_TOOLS_TEST_PG (default postgres://postgres@127.0.0.1:5432/pg_helper), and that
# its database exists. A missing server is a failure, never a skip.
set -euo pipefail
url="${IDEMPOTENT_TOOLS_TEST_PG:-postgres://postgres@127.0.0.1:5432/pg_helper}"
db="${url##*/}"; db="${db%%\?*}"
admin="${url%/*}/postgres"

if ! command -v pg_config >/dev/null || ! command -v psql >/dev/null; then
  (apt-get update -qq && apt-get install -y -qq postgresql postgresql-client) || { echo "cannot install PostgreSQL" >&2; exit 1; }
fi
bindir="$(pg_config --bindir)"
if ! psql "$admin" -Atqc 'select 1' >/dev/null 2>&1; then
  # No server at that address: start a throwaway one there (trust auth, loopback only).
  data="$(mktemp -d /tmp/idempotent-tools-ci-pg.XXXXXX)"
  run=()
  if [ "$(id -u)" = 0 ]; then chown postgres: "$data"; run=(runuser -u postgres --); fi
  "${run[@]}" "$bindir/initdb" -D "$data/data" -U postgres --auth=trust -E UTF8 >/dev/null
  "${run[@]}" "$bindir/pg_ctl" -D "$data/data" -l "$data/log" -w \
    -o "-p 5432 -k $data -c listen_addresses=127.0.0.1" start >/dev/null
fi
psql "$admin" -Atqc 'select version()'
if [ "$(psql "$admin" -Atqc "select 1 from pg_database where datname = '$db'")" != 1 ]; then
  psql "$admin" -qc "create database \"$db\""
fi
psql "$url" -Atqc 'select current_database()'
