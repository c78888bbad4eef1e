#!/bin/bash
# Installs the Debian packages the build and the tests need, only those that
# are missing: the PostgreSQL 15 server and headers, pgTAP and pg_prove,
# IPC::Run for the TAP tests, PgBouncer for the pooler test.
#   test/install-deps.sh --plots   only what `make plots` needs: matplotlib
#                                  for Debian's python3 (no test needs it)
# Where everything is already present (say, a prepared machine without
# network access) it does nothing.
set -euo pipefail

PGVER=15
missing=()
plots=
[ "${1:-}" = --plots ] && plots=1

have_pkg() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

if [ -n "$plots" ]; then
	# test/bench/plot-results.py, run by Debian's python3
	/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || have_pkg python3-matplotlib ||
		missing+=(python3-matplotlib)
else
# Each need is met either by the package or by what it provides, so that a
# machine that got PostgreSQL some other way is left alone.
[ -x /usr/lib/postgresql/$PGVER/bin/postgres ] || have_pkg postgresql-$PGVER ||
	missing+=(postgresql-$PGVER)
{ command -v pg_config >/dev/null &&
	[ -f "$(pg_config --includedir-server 2>/dev/null)/postgres.h" ] &&
	[ -f "$(pg_config --pgxs 2>/dev/null)" ]; } || have_pkg postgresql-server-dev-$PGVER ||
	missing+=(postgresql-server-dev-$PGVER)
[ -f "$(pg_config --sharedir 2>/dev/null)/extension/pgtap.control" ] ||
	have_pkg postgresql-$PGVER-pgtap || missing+=(postgresql-$PGVER-pgtap)
{ command -v pg_prove >/dev/null && perl -MTAP::Parser::SourceHandler::pgTAP -e 1 2>/dev/null; } ||
	have_pkg libtap-parser-sourcehandler-pgtap-perl ||
	missing+=(libtap-parser-sourcehandler-pgtap-perl)
# The TAP tests (t/*.pl): PostgreSQL::Test::Cluster, shipped with the
# server headers, runs psql and pg_ctl through IPC::Run; prove comes with
# perl.
{ perl -MIPC::Run -e 1 2>/dev/null && command -v prove >/dev/null; } ||
	have_pkg libipc-run-perl || missing+=(libipc-run-perl)
# t/006_pooler.pl runs cpht behind PgBouncer in transaction mode.
command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ] || have_pkg pgbouncer || missing+=(pgbouncer)
# The throwaway test server is started with pg_virtualenv.
if [ "${CPHT_TEST_SERVER:-throwaway}" != running ]; then
	command -v pg_virtualenv >/dev/null || have_pkg postgresql-common || missing+=(postgresql-common)
fi
# test/check-bench-guard.sh runs the benchmark guard, a python3 script.
command -v python3 >/dev/null || have_pkg python3 || missing+=(python3)
command -v make >/dev/null || missing+=(make)
command -v gcc >/dev/null || missing+=(gcc)
fi

if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all dependencies present"
	exit 0
fi

echo "install-deps: installing ${missing[*]}"
if [ "$(id -u)" != 0 ]; then
	SUDO=sudo
else
	SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
