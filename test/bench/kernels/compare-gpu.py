#!/usr/bin/env python3
"""Compare gpu_bench CSVs with committed reference figures of the same GPU model.

    test/bench/kernels/compare-gpu.py [--ref REF.csv] [--min 0.97] RUN.csv [RUN.csv ...]

Each RUN.csv is one `gpu_bench --csv` output; with several (repeated runs,
e.g. interleaved with other work), each row's median over them is compared.
The reference is, unless --ref names one, test/bench/results/gpu-ref-MODEL.csv
for the device the runs name (MODEL: the device name in lower case, runs of
other characters as one '-'; e.g. gpu-ref-nvidia-h100-80gb-hbm3.csv).  A
reference may hold repeated rows (several runs): their median is taken.

Rows are matched on table, op, pos, slot bits, bucket, secondary bits, fill
and mode; ceiling rows are listed, not judged.  Every matched row prints its
ratio; rows below --min times the reference (default 0.97), and rows the
reference has but the run reports FULL (ok = 0), are failures.  Rows only in
one of the two are counted.  The exit status is 0 when nothing failed, 1 when
something did, 2 when the runs and the reference are of different GPU models
or nothing matched (a comparison across models says nothing).
"""
import argparse
import csv
import os
import re
import statistics
import sys

KEY = ("table", "op", "pos", "slot_bits", "bucket", "secondary_bits", "fill", "mode")


def slug(device):
    return re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")


def load(paths):
    """{key: [rates]}, {key: [ok flags]}, set of devices."""
    rates, oks, devices = {}, {}, set()
    for path in paths:
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                devices.add(r["device"])
                k = tuple(r[c] for c in KEY)
                ok = r.get("ok", "1") not in ("0", "")
                oks.setdefault(k, []).append(ok)
                if ok:
                    try:
                        rates.setdefault(k, []).append(float(r["gkeys_s"]))
                    except ValueError:
                        pass
    return rates, oks, devices


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", help="gpu_bench CSV files of one device")
    ap.add_argument("--ref", help="reference CSV (default: test/bench/results/gpu-ref-MODEL.csv)")
    ap.add_argument("--min", type=float, default=0.97, help="lowest ratio that passes")
    ap.add_argument("--quiet", action="store_true", help="print failures and the summary only")
    a = ap.parse_args()

    run_rates, run_oks, run_dev = load(a.runs)
    if len(run_dev) != 1:
        print("runs name %d devices (%s): compare runs of one GPU model" %
              (len(run_dev), ", ".join(sorted(run_dev)) or "none"))
        return 2
    device = run_dev.pop()
    ref = a.ref or os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "results",
                                "gpu-ref-%s.csv" % slug(device))
    if not os.path.exists(ref):
        print("no reference figures for %s (%s)" % (device, ref))
        return 2
    ref_rates, ref_oks, ref_dev = load([ref])
    if ref_dev != {device}:
        print("reference %s is of %s, the runs of %s: no comparison" %
              (ref, ", ".join(sorted(ref_dev)), device))
        return 2

    print("device %s; reference %s; %d file(s); failing below %.2fx" %
          (device, os.path.relpath(ref), len(a.runs), a.min))
    fails, matched, only_ref, only_run = [], 0, 0, 0
    ratios = []
    for k in sorted(set(ref_oks) | set(run_oks)):
        name = " ".join(k[:6]) + " fill " + k[6] + " " + k[7]
        if k not in run_oks:
            only_ref += 1
            continue
        if k not in ref_oks:
            only_run += 1
            continue
        if k[0] == "ceiling":
            if not a.quiet and k in ref_rates and k in run_rates:
                print("  %-52s %8.2f %8.2f  %5.2fx  (ceiling)" % (
                    name, statistics.median(ref_rates[k]), statistics.median(run_rates[k]),
                    statistics.median(run_rates[k]) / statistics.median(ref_rates[k])))
            continue
        if k not in ref_rates:
            continue			# FULL in the reference too: nothing to hold
        matched += 1
        want = statistics.median(ref_rates[k])
        if k not in run_rates:
            fails.append(name)
            print("  %-52s %8.2f     FULL  FAIL" % (name, want))
            continue
        got = statistics.median(run_rates[k])
        ratio = got / want if want > 0 else float("inf")
        ratios.append(ratio)
        bad = ratio < a.min
        if bad:
            fails.append(name)
        if bad or not a.quiet:
            print("  %-52s %8.2f %8.2f  %5.2fx%s" % (name, want, got, ratio, "  FAIL" if bad else ""))
    if matched == 0:
        print("no rows in common with the reference")
        return 2
    print("%d rows compared (median ratio %.3fx, lowest %.3fx); %d below %.2fx; "
          "%d only in the reference, %d only in the runs" %
          (matched, statistics.median(ratios) if ratios else 0, min(ratios) if ratios else 0,
           len(fails), a.min, only_ref, only_run))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
