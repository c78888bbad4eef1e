#!/bin/bash
# The door rules of the source tree (docs/layout.md), checked from the
# #include lines alone: no compiler, no PostgreSQL, well under a second.
#
#   test/check-layout.sh [ROOT]        (default: the repository root)
#
# Fails (exit 1, one line per violation) when
#   - a kernels file includes a header private to another kernels folder:
#     each folder offers only the headers listed in DOORS below, to the
#     folders named there;
#   - a src file includes anything of kernels/ but its doors (cpht_table.h,
#     cpht_gpu.h, cpht_util.h);
#   - a kernels file includes a PostgreSQL header (postgres.h, fmgr.h, or one
#     of PostgreSQL's include folders), or a src file a CUDA header;
#   - a src file includes a header of another src folder other than that
#     folder's door (SRC_DOORS below), or a door of a folder above its own
#     in the layers api > plan > stream > session > tableref > client >
#     worker > shmem > leaves (guc.h, errors.h, memcap.h at the top of
#     src/); so the worker never includes client/, tableref/, session/ or
#     api/, and shmem/ nothing above it.  SRC_EXCEPTIONS lists the known
#     exceptions, each with its reason (docs/layout.md).
# Includes are written "folder/name.h" (the build puts only -Isrc -Ikernels
# on the path), so a bare "name.h" of another folder is a violation too.
# Tests and benchmarks (test/) are white-box and exempt.
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"

# kernels/<folder>/<header>: which kernels folders (or single files, by
# their path under kernels/) may include it; its own folder always may.  A
# header not listed is private to its folder.
declare -A DOORS=(
	[table/device_ops.h]="shards cpu gpu"	# the device ops table and struct cpht_table
	[table/layout.h]="shards cpu gpu"		# slot and bucket arithmetic
	[table/kind_policy.h]="shards cpu gpu"	# the rules of each kind's layout
	[table/table_layer.h]="shards"			# the single-table internals a shard runs
	[shards/shards.h]="table/table_api.c"	# the composite: its one caller
	[util/threads.h]="table shards cpu gpu"
	[util/key_span.h]="table shards cpu gpu"	# the span of keys, the zigzag fold
	[util/faults.h]="table shards cpu gpu"
)
# the top-level doors (kernels/cpht_*.h) anyone may include
TOP_DOORS="cpht_table.h cpht_gpu.h cpht_util.h"
KFOLDERS="table shards cpu gpu util"
# PostgreSQL's server include folders and headers a kernels file must not use
PG_INCLUDE='^(postgres|postgres_ext|postgres_fe|fmgr|funcapi|miscadmin|c|pg_config)\.h$|^(access|catalog|commands|common|executor|lib|libpq|mb|nodes|optimizer|parser|port|postmaster|replication|rewrite|storage|tcop|utils)/'
CUDA_INCLUDE='^(cuda|cuda_runtime|cuda_runtime_api|cuda_fp16|cooperative_groups|nvml|curand)(\.h|/)|^(cub|thrust|cuda|cooperative_groups)/|\.cuh$'

fail=0
violation() {
	echo "layout: $1" >&2
	fail=1
}

# includes FILE: "kind name" per #include line (kind: q for "", a for <>)
includes() {
	sed -nE 's@^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*@q \1@p; s@^[[:space:]]*#[[:space:]]*include[[:space:]]*<([^>]+)>.*@a \1@p' "$1"
}

kernel_files=$(find kernels -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort)
for f in $kernel_files; do
	rel=${f#kernels/}
	case "$rel" in
		*/*) folder=${rel%%/*} ;;
		*) folder= ;;			# a top-level door
	esac
	while read -r kind name; do
		[ -n "$name" ] || continue
		if [[ "$name" =~ $PG_INCLUDE ]]; then
			violation "$f includes PostgreSQL's $name (kernels/ is plain C or CUDA)"
			continue
		fi
		[ "$kind" = q ] || continue
		if [[ " $TOP_DOORS " == *" $name "* ]]; then
			continue
		fi
		case "$name" in
			*/*)
				target=${name%%/*}
				if [[ " $KFOLDERS " != *" $target "* ]] || [ ! -f "kernels/$name" ]; then
					violation "$f includes \"$name\", which is no kernels header"
				elif [ "$target" != "$folder" ]; then
					allowed=${DOORS[$name]:-}
					if [ -z "$folder" ] || { [[ " $allowed " != *" $folder "* ]] &&
						[[ " $allowed " != *" $rel "* ]]; }; then
						violation "$f includes \"$name\", private to kernels/$target/"
					fi
				fi
				;;
			*)
				violation "$f includes \"$name\" without its folder (write \"folder/$name\")"
				;;
		esac
	done < <(includes "$f")
done

# src/: kernels only through the top-level doors; no CUDA header
kernel_names=" $(cd kernels && find . -type f \( -name '*.h' -o -name '*.cuh' \) -printf '%P %f ' ) "
src_files=$(find src -type f \( -name '*.c' -o -name '*.h' \) | sort)
for f in $src_files; do
	while read -r kind name; do
		[ -n "$name" ] || continue
		if [[ "$name" =~ $CUDA_INCLUDE ]]; then
			violation "$f includes the CUDA header $name (src/ is PostgreSQL C only)"
			continue
		fi
		[ "$kind" = q ] || continue
		if [[ " $TOP_DOORS " == *" $name "* ]]; then
			continue
		fi
		# a kernels header by its path under kernels/ or by its bare name,
		# unless src/ has a header of that path itself
		if [[ "$kernel_names" == *" $name "* ]] && [ ! -f "src/$name" ] &&
			! compgen -G "src/*/$name" >/dev/null; then
			violation "$f includes kernels' \"$name\" (src/ uses only $TOP_DOORS)"
		fi
	done < <(includes "$f")
done

# src/: the door of each folder, and the layers (higher may include lower)
declare -A SRC_DOORS=(
	[api]=api/api.h
	[plan]=plan/plan.h
	[stream]=stream/stream.h
	[session]=session/session.h
	[tableref]=tableref/tableref.h
	[client]=client/client.h
	[worker]=worker/worker.h
	[shmem]=shmem/protocol.h
)
declare -A SRC_RANK=([api]=8 [plan]=7 [stream]=6 [session]=5 [tableref]=4 [client]=3 [worker]=2 [shmem]=1)
LEAVES="guc.h errors.h memcap.h"
# "file header": includes that go against the layers, known and kept
# (docs/layout.md says why); a header only in its door's own folder list.
SRC_EXCEPTIONS="
"
for f in $src_files; do
	rel=${f#src/}
	case "$rel" in
		*/*) folder=${rel%%/*}; rank=${SRC_RANK[$folder]:-}
			if [ -z "$rank" ]; then
				violation "$f is in src/$folder/, which is no src folder of docs/layout.md"
				continue
			fi ;;
		cpht.c) folder=; rank=9 ;;		# _PG_init: may include every door
		*) folder=; rank=0 ;;			# a leaf
	esac
	where=${folder:+src/$folder/}
	where=${where:-the leaf $f}
	while read -r kind name; do
		[ "$kind" = q ] && [ -n "$name" ] || continue
		case "$name" in
			*/*)
				target=${name%%/*}
				[ -n "${SRC_DOORS[$target]:-}" ] || continue	# PostgreSQL's own folders
				if [ ! -f "src/$name" ]; then
					violation "$f includes \"$name\", which is no src header"
				elif [ "$target" = "$folder" ]; then
					:
				elif [ "$name" != "${SRC_DOORS[$target]}" ]; then
					violation "$f includes \"$name\", private to src/$target/ (its door is ${SRC_DOORS[$target]})"
				elif [ "${SRC_RANK[$target]}" -ge "$rank" ] &&
					[[ "$SRC_EXCEPTIONS" != *"
$f $name
"* ]]; then
					violation "$f includes \"$name\": src/$target/ is not below $where (layers: api > plan > stream > session > tableref > client > worker > shmem > leaves)"
				fi
				;;
			*)
				if [[ " $LEAVES " == *" $name "* ]] || [[ " $TOP_DOORS " == *" $name "* ]]; then
					continue
				fi
				if [ -f "src/$name" ] || compgen -G "src/*/$name" >/dev/null; then
					violation "$f includes \"$name\" without its folder (write \"folder/$name\")"
				fi
				;;
		esac
	done < <(includes "$f")
done

if [ "$fail" -ne 0 ]; then
	echo "layout: FAILED (docs/layout.md says which header each folder offers)" >&2
	exit 1
fi
echo "layout: ok ($(echo "$kernel_files" | wc -w) kernels files, $(echo "$src_files" | wc -w) src files)"
