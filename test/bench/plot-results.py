#!/usr/bin/env python3
"""plot-results.py — the figures of docs/results.md, one per question, from
the CSVs under test/bench/results/ (matplotlib; `make plots` installs it and
runs this script).

    test/bench/plot-results.py [OUT_DIR]      (default docs/figures)

Writes each figure as PNG and SVG:

  find-new-ids-h100      which ids of a batch are new: cpht's patterns
                         against count(id) and the anti-join (H100)
  load-new-rows-h100     loading only the new rows: cpht_insert_new against
                         INSERT ... ON CONFLICT DO NOTHING (H100)
  ingest-cpu-2core       both questions with the tables on 2 CPU cores
  kernels-lookups-vs-paper, kernels-inserts-vs-paper
                         the GPU kernels against the compact-hashing
                         paper's code on the same H100
  kernels-vs-cucollections-h200
                         the GPU kernels against cuCollections' static_set
                         on the same keys, in one run (H200)
  shards-speedup-h100    one find-or-put of 200M keys on a table sharded
                         over 2 and 4 GPUs, against one GPU (H100s)
  shards-speedup-h200    the same on H200s, with the routing buffers made
                         with the table

A point is the median of the repetitions its CSV names (its reps column); where several CSVs
hold the same pattern at the same row count, the first listed below wins.
cpht's patterns are solid lines, PostgreSQL's own ways dashed, at most six
series a figure.
"""
import csv
import os
import re
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
# SVG text stays text (smaller, searchable), and the same data gives the same file
matplotlib.rcParams["svg.fonttype"] = "none"
matplotlib.rcParams["svg.hashsalt"] = "cpht"
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
ROOT = os.path.dirname(os.path.dirname(HERE))

# Colour-blind-safe colours (Okabe and Ito), one per series of a figure.
COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9"]
NATIVE_COLOURS = ["#000000", "#777777"]


def ingest(files):
    """{pattern: {rows: median seconds}} from ingest-bench.sh CSVs; the first
    file that has a point keeps it."""
    out = {}
    for name in files:
        with open(os.path.join(RESULTS, name), newline="") as f:
            for row in csv.DictReader(f):
                if not row["median_s"]:
                    continue                    # n/a rows
                out.setdefault(row["pattern"], {}).setdefault(int(row["rows"]), float(row["median_s"]))
    return out


def rows_label(v, _pos=None):
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= div:
            return f"{v / div:g}{unit}"
    return f"{v:g}"


def seconds_label(v, _pos=None):
    return f"{v:g}"


def caption(fig, ax, note):
    """The legend under the axes, in two columns, and under it the note
    (machine, date, data), wrapped to the figure's width."""
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(-0.08, -0.13), ncol=2, frameon=False)
    fig.text(0.03, -0.13, textwrap.fill(note, 135), fontsize=7.5, ha="left", va="top", color="#333333")


def save(fig, out_dir, name):
    for ext in ("png", "svg"):
        path = os.path.join(out_dir, f"{name}.{ext}")
        fig.savefig(path, dpi=130 if ext == "png" else None, bbox_inches="tight",
                    metadata={"Date": None} if ext == "svg" else None)
        print("wrote", os.path.relpath(path, ROOT))
    plt.close(fig)


def rows_figure(out_dir, name, title, note, data, series):
    """series: (pattern, label, native) in legend order; log-log axes."""
    fig, ax = plt.subplots(figsize=(9, 5))
    own = natives = 0
    xs_all = set()
    for pattern, label, native in series:
        points = sorted(data.get(pattern, {}).items())
        if not points:
            sys.exit(f"plot-results: no points for {pattern} in {name}")
        xs, ys = zip(*points)
        xs_all.update(xs)
        if native:
            colour, style = NATIVE_COLOURS[natives], "--"
            natives += 1
        else:
            colour, style = COLOURS[own], "-"
            own += 1
        ax.plot(xs, ys, style, color=colour, marker="o", markersize=5, linewidth=2, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(sorted(xs_all))
    ax.xaxis.set_major_formatter(FuncFormatter(rows_label))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, p: ""))
    ax.yaxis.set_major_formatter(FuncFormatter(seconds_label))
    ax.set_xlabel("staging rows (log scale)")
    ax.set_ylabel("statement time, seconds (log scale)")
    ax.set_title(title, fontsize=12, loc="left")
    ax.grid(True, which="major", alpha=0.35)
    caption(fig, ax, note)
    save(fig, out_dir, name)


def paper_figure(out_dir, name, title, note, rows, series):
    """series: ((table, op, pos), label); each drawn twice, the paper's best
    (dashed) and ours (solid), in one colour."""
    fig, ax = plt.subplots(figsize=(9, 5))
    for i, (key, label) in enumerate(series):
        pts = sorted((float(r["fill"]), float(r["paper_gkeys_s"]), float(r["ours_gkeys_s"]))
                     for r in rows if (r["table"], r["op"], r["pos"]) == key)
        if not pts:
            sys.exit(f"plot-results: no points for {key} in {name}")
        fills, paper, ours = zip(*pts)
        ax.plot(fills, ours, "-", color=COLOURS[i], marker="o", markersize=5, linewidth=2,
                label=f"{label}: cpht")
        ax.plot(fills, paper, "--", color=COLOURS[i], marker="s", markersize=4, linewidth=1.5,
                label=f"{label}: paper's code")
    ax.set_xlabel("table fill after the operation (fraction of slots)")
    ax.set_ylabel("throughput, G keys/s")
    ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=12, loc="left")
    ax.grid(True, alpha=0.35)
    caption(fig, ax, note)
    save(fig, out_dir, name)


def shard_medians(name):
    """{(case, path): (one GPU ms, sharded ms)} from the "median, ..." lines
    that test/bench/kernels/shard_bench.c prints last."""
    out = {}
    pat = re.compile(r"median, all (new|found):\s+1 GPU ([0-9.]+) ms, (\d+) shards (routed|host path) ([0-9.]+) ms")
    with open(os.path.join(RESULTS, name)) as f:
        for line in f:
            m = pat.match(line.strip())
            if m:
                out[(m.group(1), m.group(4))] = (float(m.group(2)), float(m.group(5)))
    if not out:
        sys.exit(f"plot-results: no median lines in {name}")
    return out


def shards_figure(out_dir):
    shards_speedup(out_dir, "shards-speedup-h100", "NVIDIA H100 80GB HBM3, NVLink",
                   "shard-bench-2xh100-2026-11-28-final-pinned.txt", "shard-bench-4xh100-2026-11-28-pinned.txt",
                   "before the routing buffers moved to the table's creation")
    shards_speedup(out_dir, "shards-speedup-h200", "NVIDIA H200, NVLink",
                   "shard-bench-2xh200-2026-11-28-pinned.txt", "shard-bench-4xh200-2026-11-28-pinned.txt",
                   "the routing buffers made with the table; 2 and 4 GPUs on two machines")
    shards_speedup(out_dir, "shards-speedup-h200-overlap", "NVIDIA H200, NVLink",
                   "shard-bench-2xh200-2026-11-28-overlap-pinned.txt",
                   "shard-bench-4xh200-2026-11-28-overlap-pinned.txt",
                   "routing without a sort, the exchange under the shards' work (45495bb); one machine "
                   "whose uploads bound the call")


def shards_speedup(out_dir, name, gpu, two, four, when):
    runs = {2: shard_medians(two), 4: shard_medians(four)}
    fig, ax = plt.subplots(figsize=(9, 5))
    gpus = [1, 2, 4]
    ax.plot(gpus, gpus, ":", color="grey", linewidth=1.5, label="as many times one GPU as GPUs")
    series = [(("found", "routed"), "routed on the GPUs, keys all found", COLOURS[0], "-"),
              (("new", "routed"), "routed on the GPUs, keys all new", COLOURS[1], "-"),
              (("found", "host path"), "split on the host, keys all found", NATIVE_COLOURS[0], "--"),
              (("new", "host path"), "split on the host, keys all new", NATIVE_COLOURS[1], "--")]
    for key, label, colour, style in series:
        ys = [1.0] + [runs[n][key][0] / runs[n][key][1] for n in (2, 4)]
        ax.plot(gpus, ys, style, color=colour, marker="o", markersize=5, linewidth=2, label=label)
    ax.plot([2, 4], [1.8, 3.4], "x", color="black", markersize=9, label="target (all new and all found)")
    ax.set_xticks(gpus)
    ax.set_xlabel(f"GPUs ({gpu})")
    ax.set_ylabel("speed-up over one GPU")
    ax.set_ylim(bottom=0)
    ax.set_title("A find-or-put of 200M keys on a table sharded over the GPUs", fontsize=12, loc="left")
    ax.grid(True, alpha=0.35)
    caption(fig, ax, f"2026-11-28, {when}; medians of 5 side by side with one GPU in the same run, keys "
            "and answers in registered host memory (shard_bench 200000000 N 5 64 gpu pinned). Data: "
            f"test/bench/results/{two}, {four} (see docs/sharding.md).")
    save(fig, out_dir, name)


def cuco_figure(out_dir):
    sys.path.insert(0, os.path.join(HERE, "kernels"))
    from gpu_bench_csv import load_medians

    cuco = load_medians([os.path.join(RESULTS, "cuco-h200-2026-11-29.csv")])
    ours = load_medians([os.path.join(RESULTS, "gpu-bench-h200-2026-11-29.csv")])

    def best(rows, op, pos):
        b = {}
        for k, v in rows.items():
            if k[4] == op and k[5] == pos:
                b[float(k[6])] = max(b.get(float(k[6]), 0.0), v)
        return sorted(b.items())

    fig, ax = plt.subplots(figsize=(9, 5))
    for i, (op, pos, label) in enumerate([("fop50", "-", "find-or-put, half the keys new"),
                                          ("put", "-", "insert into an empty table"),
                                          ("find", "0.5", "find, half the queries hits")]):
        for rows, style, marker, who in ((ours, "-", "o", "cpht"), (cuco, "--", "s", "cuCollections")):
            pts = best(rows, op, pos)
            if not pts:
                sys.exit(f"plot-results: no points for {op} {pos} in kernels-vs-cucollections-h200")
            xs, ys = zip(*pts)
            ax.plot(xs, ys, style, color=COLOURS[i], marker=marker, markersize=5 if who == "cpht" else 4,
                    linewidth=2 if who == "cpht" else 1.5, label=f"{label}: {who}")
    ax.set_xlabel("table fill after the operation (fraction of slots)")
    ax.set_ylabel("throughput, G keys/s")
    ax.set_ylim(bottom=0)
    ax.set_title("GPU kernels against cuCollections' static_set, same keys, one run", fontsize=12, loc="left")
    ax.grid(True, alpha=0.35)
    caption(fig, ax, "NVIDIA H200, 2026-11-29: at each fill cpht's best configuration of the run (0.3-0.5 GiB "
            "of slots) against cuCollections' best probing (1 GiB of 8-byte slots); 2^27 slots, keys uniform "
            "in [0, 2^37) already on the GPU, medians. Data: test/bench/results/cuco-h200-2026-11-29.csv, "
            "gpu-bench-h200-2026-11-29.csv (see test/bench/kernels/gpu-results.md).")
    save(fig, out_dir, "kernels-vs-cucollections-h200")


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "docs", "figures")
    os.makedirs(out_dir, exist_ok=True)

    # Which ids of a batch are new, H100.  1M-10M: one sweep of
    # ingest-bench.sh; 30M: the later run of the relation functions.
    h100 = ingest(["ingest-h100-1000000-2026-11-23.csv", "ingest-h100-3000000-2026-11-23.csv",
                   "ingest-h100-10000000-2026-11-23.csv", "ingest-list-h100-30m-2026-11-23.csv"])
    rows_figure(
        out_dir, "find-new-ids-h100",
        "Counting or listing the new ids of a batch, against count(id)",
        "NVIDIA H100, 16 cores, tables on the GPU, cpht preloaded, 8 parallel workers, random 64-bit ids "
        "(3/4 distinct, half of them seen before); 2026-11-23: medians of 3 at 1M and 3M, one run at 10M, "
        "medians of 5 at 30M (a later run that day; the anti-join and the array join were not run at 30M). Data: test/bench/results/"
        "ingest-h100-*-2026-11-23.csv, ingest-list-h100-30m-2026-11-23.csv.",
        h100,
        [("count_parallel", "SELECT count(id): the floor of any scan", True),
         ("anti_join", "SELECT DISTINCT id ... WHERE NOT EXISTS (anti-join)", True),
         ("fop_relation_shared", "cpht_fop_relation(h, 'staging'), shared table", False),
         ("new_relation_shared", "count(*) FROM cpht_fop_new_relation(h, 'staging'), shared", False),
         ("fop_agg_parallel", "cpht_fop_agg(h, id), shared table, parallel", False),
         ("unnest_fop", "unnest(ids, cpht_fop(h, ids)) of array_agg(id)", False)])

    # Loading only the new rows, H100: the sweep, then the 100M runs.
    loads = ingest(["ingest-h100-1000000-2026-11-23.csv", "ingest-h100-3000000-2026-11-23.csv",
                    "ingest-h100-10000000-2026-11-23.csv", "ingest-loads-h100-100m-random-2026-11-23.csv"])
    node = ingest(["ingest-loads-h100-10m-random-rows-by-tid-2026-11-23.csv"])
    loads["load_insert_new_node"] = node["load_insert_new"]
    rows_figure(
        out_dir, "load-new-rows-h100",
        "Loading only the rows whose id is new, against ON CONFLICT DO NOTHING",
        "NVIDIA H100, 16 cores, 8 parallel workers, random ids (3/4 distinct, half seen: 3.75M new rows of 10M); "
        "events keyed by id unless 'unkeyed'; the floor inserts exactly the new rows from a table holding only "
        "them. 2026-11-23: medians of 3 at 1M and 3M, one run at 10M, all before the 'cpht rows by tid' node; the single point is "
        "cpht_insert_new with that node, median of 5, the same day; 100M: one run each. Data: "
        "test/bench/results/ingest-h100-*-2026-11-23.csv, ingest-loads-h100-*-2026-11-23.csv.",
        loads,
        [("on_conflict", "INSERT ... ON CONFLICT (id) DO NOTHING", True),
         ("load_floor_plain", "floor: the new rows alone, in id order", True),
         ("load_insert_new", "cpht_insert_new into events", False),
         ("load_insert_new_node", "the same with the 'cpht rows by tid' node", False),
         ("load_fop_rows", "INSERT ... SELECT * FROM cpht_fop_rows(...)", False),
         ("load_insert_new_unkeyed", "cpht_insert_new into unkeyed events", False)])

    # Both questions on the 2-core machine, tables on the CPU.
    cpu = ingest(["ingest-cpu-300000-2026-11-23.csv", "ingest-cpu-1000000-2026-11-23.csv",
                  "ingest-cpu-3000000-2026-11-23.csv", "ingest-loads-cpu-100m-random-2026-11-23.csv"])
    rows_figure(
        out_dir, "ingest-cpu-2core",
        "Without a GPU: 2 CPU cores, tables on the CPU",
        "2-core development machine, no GPU, cpht preloaded, 2 parallel workers, random ids (3/4 distinct, half "
        "seen); 2026-11-23: medians of 3 at 300k and 1M, one run at 3M and at 100M (there cpht_insert_new into the keyed events "
        "inserted in heap order, before the sort by key). Data: test/bench/results/ingest-cpu-*-2026-11-23.csv, "
        "ingest-loads-cpu-100m-random-2026-11-23.csv.",
        cpu,
        [("count_parallel", "SELECT count(id)", True),
         ("on_conflict", "INSERT ... ON CONFLICT (id) DO NOTHING", True),
         ("fop_relation", "cpht_fop_relation(h, 'staging'): new ids counted", False),
         ("load_insert_new", "cpht_insert_new into events", False),
         ("load_insert_new_unkeyed", "cpht_insert_new into unkeyed events", False),
         ("unnest_fop", "unnest(ids, cpht_fop(h, ids)) of array_agg(id)", False)])

    with open(os.path.join(RESULTS, "kernels-vs-paper-h100-2026-11-22.csv"), newline="") as f:
        paper = list(csv.DictReader(f))
    kernel_note = ("NVIDIA H100, 2026-11-22: at each fill the paper's best configuration against cpht's best that "
                   "uses no more slot memory; 2^27 primary + 2^24 secondary slots (iceberg) or 2^27 slots "
                   "(cuckoo), keys uniform in [0, 2^37) already on the GPU, medians of 3. Data: "
                   "test/bench/results/kernels-vs-paper-h100-2026-11-22.csv (from gpu-bench.csv, "
                   "see test/bench/kernels/gpu-results.md).")
    paper_figure(
        out_dir, "kernels-lookups-vs-paper",
        "GPU kernels against the compact-hashing paper's code: lookups",
        kernel_note, paper,
        [(("iceberg", "fop", "0.5"), "iceberg find-or-put, half full before"),
         (("iceberg", "find", "0.5"), "iceberg find, 50% hits"),
         (("cuckoo", "find", "0.5"), "cuckoo find, 50% hits")])
    paper_figure(
        out_dir, "kernels-inserts-vs-paper",
        "GPU kernels against the compact-hashing paper's code: filling a table",
        kernel_note, paper,
        [(("iceberg", "fop", "0"), "iceberg find-or-put from empty"),
         (("iceberg", "put", "-"), "iceberg put"),
         (("cuckoo", "put", "-"), "cuckoo put")])
    cuco_figure(out_dir)
    shards_figure(out_dir)


if __name__ == "__main__":
    main()
