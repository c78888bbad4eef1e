#!/bin/sh
# The kernels' benchmark guard (test/bench/kernels/compare-gpu.py), checked
# without a GPU on the committed reference figures: each GPU model's
# reference against itself passes, and the same figures with one row 10%
# slower fail, naming that row.  (The guard itself runs on a GPU machine:
# test/bench/kernels/compare-gpu.sh.)
set -eu
cd "$(dirname "$0")/.."
guard=test/bench/kernels/compare-gpu.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for ref in test/bench/results/gpu-ref-*.csv; do
	# the run names its device; the guard finds the reference by that name
	cp "$ref" "$tmp/run.csv"
	if ! python3 "$guard" --quiet "$tmp/run.csv" > "$tmp/out" 2>&1; then
		echo "bench guard: $ref against itself failed:"; cat "$tmp/out"; exit 1
	fi
	# one find row 10% slower: its median falls below 0.97 times the reference
	python3 - "$ref" "$tmp/slow.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
key = None
for r in rows:
    if r["table"] != "ceiling" and r["op"] == "find" and r["ok"] == "1":
        key = tuple(r[k] for k in ("table", "op", "pos", "slot_bits", "bucket", "secondary_bits", "fill", "mode"))
        break
for r in rows:
    if tuple(r[k] for k in ("table", "op", "pos", "slot_bits", "bucket", "secondary_bits", "fill", "mode")) == key:
        r["gkeys_s"] = "%.3f" % (float(r["gkeys_s"]) * 0.9)
with open(sys.argv[2], "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
    w.writeheader()
    w.writerows(rows)
PY
	rc=0
	python3 "$guard" --quiet "$tmp/slow.csv" > "$tmp/out" 2>&1 || rc=$?
	if [ "$rc" -ne 1 ]; then
		echo "bench guard: a row 10% slower than $ref was not caught (exit $rc):"; cat "$tmp/out"; exit 1
	fi
	echo "bench guard: $(basename "$ref"): passes against itself, fails a row 10% slower"
done
