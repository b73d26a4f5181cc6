#!/usr/bin/env bash
# The wheel as a user gets it (issue 13): build it (scripts/build-wheel.sh),
# pip install it into a fresh virtual environment, and from that
# environment's `pgtide` print the version and load a CSV into a
# throwaway embedded server (pgtide starts it itself; as root it runs it
# as user `pgtide`), then check the row count and stop the server.
set -euo pipefail
cd "$(dirname "$0")/.."

wheel=$(scripts/build-wheel.sh)
echo "== wheel $wheel"

tmp=$(mktemp -d)
chmod 755 "$tmp"   # the server, run as user `pgtide` under root, lives below
venv=$tmp/venv
cleanup() {
  if [ -x "$venv/bin/pgtide" ]; then
    PGTIDE_SERVER_DIR=$tmp/server "$venv/bin/pgtide" server stop >/dev/null 2>&1 || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-index "$wheel"

# Nothing configured, as on a newcomer's machine: no PG* variables, no
# ~/.pgpass, a server directory of this test's own.
unset PGHOST PGHOSTADDR PGPORT PGUSER PGDATABASE PGPASSWORD PGPASSFILE \
  PGSSLMODE PGAPPNAME PGSERVICE PGSERVICEFILE PGTIDE_DB
export HOME=$tmp PGTIDE_SERVER_DIR=$tmp/server
export PATH="$venv/bin:$PATH"
[ "$(command -v pgtide)" = "$venv/bin/pgtide" ] || { echo "test-wheel: pgtide is not the venv's" >&2; exit 1; }

cargo_version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
got=$(pgtide --version)
echo "$got"
[ "$got" = "pgtide $cargo_version" ] || { echo "test-wheel: expected pgtide $cargo_version" >&2; exit 1; }

{
  echo "id,name,at"
  for i in $(seq 1 1000); do echo "$i,name $i,2024-01-0$((i % 9 + 1))"; done
} >"$tmp/t.csv"
pgtide load "$tmp/t.csv" --table t --header --create
count=$(pgtide export --query 'SELECT count(*) FROM t' --output - --format csv)
[ "$count" = 1000 ] || { echo "test-wheel: expected 1000 rows in t, found '$count'" >&2; exit 1; }
pgtide server stop
echo "== wheel OK: pgtide --version and a 1000-row load from a fresh venv"
