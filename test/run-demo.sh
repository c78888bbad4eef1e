#!/bin/bash
# Builds and installs cpht, starts a throwaway PostgreSQL 15 server with
# shared_preload_libraries = 'cpht', runs test/demo.sql (deduplicating an
# ingest through a shared table, next to INSERT ... ON CONFLICT DO NOTHING)
# and prints its output.
#
#   CPHT_TEST_SERVER=running test/run-demo.sh   use the server PGHOST/PGPORT name
#                                               (it must preload cpht)
#   CPHT_TEST_DEVICE=cpu|gpu|auto test/run-demo.sh
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
: "${CPHT_TEST_SERVER:=throwaway}"
: "${CPHT_TEST_DEVICE:=}"

if [ "${1:-}" = --run ]; then
	if [ -n "$CPHT_TEST_DEVICE" ]; then
		export PGOPTIONS="${PGOPTIONS:-} -c cpht.device=$CPHT_TEST_DEVICE"
	fi
	if ! psql -X -q -At -d postgres -c 'SHOW shared_preload_libraries' | tr ', ' '\n\n' | grep -qx cpht; then
		echo "run-demo: the server does not preload cpht; add shared_preload_libraries = 'cpht' and restart it" >&2
		exit 1
	fi
	psql -X -q -v ON_ERROR_STOP=1 -d postgres -c 'SET client_min_messages = warning' \
		-c 'DROP DATABASE IF EXISTS cpht_demo' -c 'CREATE DATABASE cpht_demo'
	psql -X -v ON_ERROR_STOP=1 -d cpht_demo -f test/demo.sql
	psql -X -q -d postgres -c 'DROP DATABASE IF EXISTS cpht_demo'
	exit
fi

echo "== dependencies"
test/install-deps.sh
echo "== build and install"
make -j"$(nproc)" >/dev/null
make install >/dev/null

if [ "$CPHT_TEST_SERVER" = running ]; then
	"$ROOT/test/run-demo.sh" --run
else
	echo "== starting a throwaway PostgreSQL 15 server with shared_preload_libraries = 'cpht'"
	pg_virtualenv -t -v 15 -o shared_preload_libraries=cpht "$ROOT/test/run-demo.sh" --run
fi
