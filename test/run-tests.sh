#!/bin/bash
# Builds, installs and tests cpht: C unit tests of the kernels, pg_regress
# tests (sql/, expected/) and pgTAP tests (test/pgtap/) against PostgreSQL 15,
# then the TAP tests (t/*.pl), which start, crash and restart clusters of
# their own (PostgreSQL::Test::Cluster), once; CPHT_TEST_DEVICE sets
# cpht.device of their clusters too (t/CphtTest.pm).
#
#   test/run-tests.sh                      throwaway server (pg_virtualenv)
#   CPHT_TEST_SERVER=running test/run-tests.sh
#                                          a server already running, reached
#                                          through PGHOST/PGPORT/PGUSER
#   CPHT_TEST_DEVICE=cpu|gpu|auto test/run-tests.sh
#                                          every test session runs with
#                                          cpht.device set to this
#   CPHT_FUZZ_OPS=N test/run-tests.sh      operations per table kind of the
#                                          differential fuzz
#                                          (test/pgtap/fuzz.sql); without it
#                                          the bounded default of fuzz.sql
#                                          (2000), for CI; set it high
#                                          (100000) for a long run on the
#                                          GPU machine
#   CPHT_LOADERS_TXNS=N test/run-tests.sh  transactions per session of the
#                                          concurrent loaders on shared
#                                          tables (t/017_shared_loaders.pl);
#                                          150 without it
#   CPHT_DURABLE_ROUNDS=N, CPHT_RESTART_ROUNDS=N test/run-tests.sh
#                                          crash rounds of
#                                          t/013_durable_kill.pl and worker
#                                          restart rounds of
#                                          t/015_worker_restart_loaders.pl;
#                                          12 without them
#   CPHT_ROLLBACK_REPEAT=N test/run-tests.sh
#                                          runs the 120 rounds of the rollback
#                                          property (test/pgtap/rollback.sql)
#                                          N times; once without it
#   CPHT_TEST_ONLY="shared_txn api" test/run-tests.sh
#                                          a quick run while developing: only
#                                          these pgTAP files (test/pgtap/NAME.sql),
#                                          no pg_regress, no upgrade check; the
#                                          TAP tests run only when named too:
#                                          "tap" for all of them, t/NAME.pl by
#                                          its NAME, or by what they test:
#                                          "durable" (t/*durable*.pl),
#                                          "worker_restart"
#                                          (t/*worker_restart*.pl), "restart"
#                                          (t/*worker_lost*.pl), "loaders"
#                                          (t/*loaders*.pl)
#   CPHT_TEST_SHARDS=N test/run-tests.sh   every table created without
#                                          shards => N has N shards: the
#                                          server runs with cpht.shards = N
#                                          (a throwaway server: ALTER SYSTEM,
#                                          both modes; a running one: every
#                                          test session, by PGOPTIONS)
#   CPHT_TEST_SHARDED_PASS=N test/run-tests.sh
#                                          after the preloaded pass (and its
#                                          checks), the preloaded suite once
#                                          more with cpht.shards = N (CI: 2)
#   CPHT_TEST_MODES=plain|preload|both test/run-tests.sh
#                                          which modes of a throwaway server
#                                          run (both without it)
#
# A throwaway server runs the whole suite twice: first as a plain server
# (the library loaded by the sessions that use it), then restarted with
# shared_preload_libraries = 'cpht' and cpht.placement = worker, so that
# every private table lives in the cpht worker.  Against a running server the suite
# runs once, in whatever mode that server is in.
#
# Exits non-zero when anything fails.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD

: "${CPHT_TEST_SERVER:=throwaway}"
: "${CPHT_TEST_DEVICE:=}"
: "${CPHT_FUZZ_OPS:=}"
: "${CPHT_ROLLBACK_REPEAT:=}"
: "${CPHT_TEST_ONLY:=}"
: "${CPHT_TEST_MODES:=both}"
: "${CPHT_TEST_SHARDS:=}"
: "${CPHT_TEST_SHARDED_PASS:=}"
TAP_DB=cpht_tap

case "$CPHT_TEST_SERVER" in
	throwaway | running) ;;
	*) echo "CPHT_TEST_SERVER must be throwaway or running, not '$CPHT_TEST_SERVER'" >&2; exit 2 ;;
esac
case "$CPHT_TEST_MODES" in
	plain | preload | both) ;;
	*) echo "CPHT_TEST_MODES must be plain, preload or both, not '$CPHT_TEST_MODES'" >&2; exit 2 ;;
esac
# only_has NAME: whether a quick run (CPHT_TEST_ONLY) names NAME; always
# true for a full run
only_has() {
	[ -z "$CPHT_TEST_ONLY" ] || [[ " $CPHT_TEST_ONLY " == *" $1 "* ]]
}
case "$CPHT_TEST_DEVICE" in
	'' | cpu | gpu | auto) ;;
	*) echo "CPHT_TEST_DEVICE must be cpu, gpu or auto, not '$CPHT_TEST_DEVICE'" >&2; exit 2 ;;
esac
for v in CPHT_TEST_SHARDS CPHT_TEST_SHARDED_PASS; do
	if [ -n "${!v}" ] && ! [[ "${!v}" =~ ^([1-9]|1[0-6])$ ]]; then
		echo "$v must be between 1 and 16, not '${!v}'" >&2
		exit 2
	fi
done
if [ -n "$CPHT_FUZZ_OPS" ] && ! [[ "$CPHT_FUZZ_OPS" =~ ^[1-9][0-9]{0,8}$ ]]; then
	echo "CPHT_FUZZ_OPS must be a positive integer, not '$CPHT_FUZZ_OPS'" >&2
	exit 2
fi
if [ -n "$CPHT_ROLLBACK_REPEAT" ] && ! [[ "$CPHT_ROLLBACK_REPEAT" =~ ^[1-9][0-9]{0,5}$ ]]; then
	echo "CPHT_ROLLBACK_REPEAT must be a positive integer, not '$CPHT_ROLLBACK_REPEAT'" >&2
	exit 2
fi

# The part that needs a server; run inside pg_virtualenv or against the
# running one.
run_suite() {
	local failed=0

	if [ -n "$CPHT_TEST_DEVICE" ]; then
		# pg_regress keeps what PGOPTIONS holds and adds its own settings.
		export PGOPTIONS="${PGOPTIONS:-} -c cpht.device=$CPHT_TEST_DEVICE"
		echo "== every test session runs with cpht.device=$CPHT_TEST_DEVICE"
	fi

	if [ -n "$CPHT_TEST_SHARDS" ]; then
		if [ "$CPHT_TEST_SERVER" = running ]; then
			export PGOPTIONS="${PGOPTIONS:-} -c cpht.shards=$CPHT_TEST_SHARDS"
		fi
		local shards_now
		shards_now=$(psql -X -q -At -d postgres -c "LOAD 'cpht'" -c "SHOW cpht.shards")
		if [ "$shards_now" != "$CPHT_TEST_SHARDS" ]; then
			echo "== FAILED: cpht.shards is '$shards_now', not $CPHT_TEST_SHARDS (CPHT_TEST_SHARDS)"
			return 1
		fi
		echo "== tables created without shards => N have $CPHT_TEST_SHARDS shards (CPHT_TEST_SHARDS: cpht.shards)"
	fi

	local tap_files=(test/pgtap/*.sql) name
	if [ -n "$CPHT_TEST_ONLY" ]; then
		echo "== quick run: only $CPHT_TEST_ONLY (CPHT_TEST_ONLY); no pg_regress, no upgrade check"
		tap_files=()
		for name in $CPHT_TEST_ONLY; do
			if [ -f "test/pgtap/$name.sql" ]; then
				tap_files+=("test/pgtap/$name.sql")
			fi
		done
	else
		echo "== pg_regress"
		rm -f regression.diffs regression.out
		# TAP_TESTS emptied: the TAP tests run once, after the modes
		# (run_tap), not in every pass of installcheck
		if ! make installcheck TAP_TESTS=; then
			failed=1
			if [ -f regression.diffs ]; then
				echo "== regression.diffs"
				cat regression.diffs
			fi
		fi
	fi

	echo "== pgTAP"
	psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "SET client_min_messages = warning" \
		-c "DROP DATABASE IF EXISTS $TAP_DB" -c "CREATE DATABASE $TAP_DB"
	psql -X -q -v ON_ERROR_STOP=1 -d $TAP_DB -c "CREATE EXTENSION pgtap" -c "CREATE EXTENSION cpht"
	# fuzz.sql runs at top level (it commits and rolls back itself) with the
	# number of operations psql's fuzz_ops says, 2000 unless CPHT_FUZZ_OPS
	# is set; the other files ignore the variable.
	local fuzz_set=()
	if [ -n "$CPHT_FUZZ_OPS" ]; then
		fuzz_set=(--set "fuzz_ops=$CPHT_FUZZ_OPS")
		echo "== differential fuzz: $CPHT_FUZZ_OPS operations per table kind (CPHT_FUZZ_OPS)"
	else
		echo "== differential fuzz: 2000 operations per table kind (the default; CPHT_FUZZ_OPS=N for more)"
	fi
	if [ -n "$CPHT_ROLLBACK_REPEAT" ]; then
		fuzz_set+=(--set "rollback_repeat=$CPHT_ROLLBACK_REPEAT")
		echo "== rollback property: $((120 * CPHT_ROLLBACK_REPEAT)) rounds (CPHT_ROLLBACK_REPEAT)"
	fi
	# --directives and --comments show skipped tests with their reason and
	# the diagnostics (which GPU ran), so nothing is skipped unseen.
	if [ ${#tap_files[@]} -gt 0 ] &&
		! pg_prove -d $TAP_DB --failures --directives --comments ${fuzz_set[@]+"${fuzz_set[@]}"} "${tap_files[@]}"; then
		failed=1
	fi
	psql -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $TAP_DB" || true

	if [ -z "$CPHT_TEST_ONLY" ]; then
		echo "== upgrade from 0.1: ALTER EXTENSION cpht UPDATE against a fresh install"
		if ! test/upgrade-check.sh; then
			failed=1
		fi
	fi

	if [ $failed -ne 0 ]; then
		echo "== FAILED"
		return 1
	fi
	echo "== all tests passed"
}

# The throwaway server's cpht.shards: a server setting, so that every
# session has it, those the tests open through dblink included.  The
# session loads cpht first, since ALTER SYSTEM accepts only a setting it
# knows.
set_server_shards() {
	psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "LOAD 'cpht'" \
		-c "ALTER SYSTEM SET cpht.shards = $1" -c "SELECT pg_reload_conf()" > /dev/null
	# the postmaster rereads its files on the signal, a moment later
	for _ in $(seq 1 50); do
		[ "$(psql -X -q -At -d postgres -c "LOAD 'cpht'" -c "SHOW cpht.shards")" = "$1" ] && break
		sleep 0.1
	done
}

# Both modes on the throwaway server: plain, then preloaded.
run_both_modes() {
	if [ -n "$CPHT_TEST_SHARDS" ]; then
		set_server_shards "$CPHT_TEST_SHARDS"
	fi
	if [ "$CPHT_TEST_MODES" != preload ]; then
		echo "== mode 1 of 2: plain server (cpht loaded by the sessions that use it)"
		run_suite
	fi
	if [ "$CPHT_TEST_MODES" = plain ]; then
		return
	fi
	echo "== mode 2 of 2: server restarted with shared_preload_libraries = 'cpht'"
	psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "ALTER SYSTEM SET shared_preload_libraries = 'cpht'"
	pg_ctlcluster "$PGVERSION" regress restart
	# Windows of 1M keys instead of the default 4M: the streaming tests size
	# their calls by the window, and smaller ones keep them quick on the CPU.
	# (The setting exists once the library is preloaded.)
	psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "ALTER SYSTEM SET cpht.transfer_chunk = 1048576"
	pg_ctlcluster "$PGVERSION" regress restart
	psql -X -q -At -d postgres -c "SHOW shared_preload_libraries" | grep -qx cpht
	# Every private table of this pass lives in the cpht worker, so the
	# whole suite runs against the remote path too (CPU tables included).
	echo "== every test session runs with cpht.placement=worker"
	PGOPTIONS="${PGOPTIONS:-} -c cpht.placement=worker" run_suite
	if [ -n "$CPHT_TEST_SHARDED_PASS" ]; then
		echo "== the preloaded suite once more, every table of $CPHT_TEST_SHARDED_PASS shards (CPHT_TEST_SHARDED_PASS)"
		set_server_shards "$CPHT_TEST_SHARDED_PASS"
		CPHT_TEST_SHARDS=$CPHT_TEST_SHARDED_PASS PGOPTIONS="${PGOPTIONS:-} -c cpht.placement=worker" run_suite
	fi
}

# The TAP tests (t/*.pl, PostgreSQL::Test::Cluster from PGXS) by make
# prove_installcheck, against the installed cpht.  Their clusters run as
# the user that runs them, and PostgreSQL refuses to run as root: as root
# (make test on CI) they run as postgres, over a copy of what they need
# (Makefile, t/) in a directory of its own, since the tree may not be
# readable by postgres.  The clusters' logs are printed when a test fails.
run_tap() {
	local tests=() args=() name dir rc=0
	if [ -n "$CPHT_TEST_ONLY" ]; then
		for name in $CPHT_TEST_ONLY; do
			case $name in
				tap)
					tests=()
					break
					;;
				durable) tests+=(t/*durable*.pl) ;;
				worker_restart) tests+=(t/*worker_restart*.pl) ;;
				restart) tests+=(t/*worker_lost*.pl) ;;
				loaders) tests+=(t/*loaders*.pl) ;;
				*)
					if [ -f "t/$name.pl" ]; then
						tests+=("t/$name.pl")
					fi
					;;
			esac
		done
		if ! only_has tap && [ ${#tests[@]} -eq 0 ]; then
			return 0
		fi
	fi
	echo "== TAP tests (t/*.pl): clusters of their own"
	if [ ${#tests[@]} -gt 0 ]; then
		args=(PROVE_TESTS="${tests[*]}")
	fi
	if [ "$(id -u)" = 0 ]; then
		dir=$(mktemp -d /tmp/cpht-tap.XXXXXX)
		cp -r Makefile t "$dir/"
		chown -R postgres: "$dir"
		runuser -u postgres -- make -C "$dir" prove_installcheck ${args[@]+"${args[@]}"} || rc=$?
	else
		dir=$ROOT
		make prove_installcheck ${args[@]+"${args[@]}"} || rc=$?
	fi
	if [ $rc -ne 0 ]; then
		echo "== FAILED: TAP tests; their logs ($dir/tmp_check/log):"
		tail -n 100 "$dir"/tmp_check/log/* 2>/dev/null || true
	elif [ "$dir" != "$ROOT" ]; then
		rm -rf "$dir"
	fi
	return $rc
}

if [ "${1:-}" = --suite ]; then
	run_both_modes
	exit
fi

# Before anything is installed or built: the door rules of the source
# tree (docs/layout.md), from the #include lines alone.
echo "== layout"
test/check-layout.sh

echo "== dependencies"
test/install-deps.sh

# Before anything is built: META.json (PGXN) must follow its spec and carry
# cpht.control's default_version.
echo "== META.json"
test/check-meta.pl

# The kernels' benchmark guard finds its reference figures and fails a
# slower row (checked on the committed figures; it runs on a GPU machine).
echo "== benchmark guard"
test/check-bench-guard.sh

echo "== build"
make -j"$(nproc)"
echo "== install"
make install
echo "== unit tests"
make unit

rc=0
if [ "$CPHT_TEST_SERVER" = running ]; then
	run_suite || rc=$?
else
	# A temporary cluster owned by the postgres user (the server refuses to
	# run as root), removed again when the suite ends.
	echo "== starting a throwaway PostgreSQL 15 server"
	pg_virtualenv -t -v 15 "$ROOT/test/run-tests.sh" --suite || rc=$?
fi
run_tap || rc=$?
if [ $rc -ne 0 ]; then
	echo "== FAILED (see above)"
fi
exit $rc
