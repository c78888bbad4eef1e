#!/usr/bin/env python3
"""Two builds of gpu_bench run alternately on one machine (ab-gpu.sh): the
ratio NEW / BASE of each row's median, summarised per configuration and
operation (lowest, median and highest over its fills and hit shares).

    test/bench/kernels/compare-ab.py OUT_DIR        (the folder ab-gpu.sh wrote)
"""
import collections
import glob
import os
import statistics
import sys

from gpu_bench_csv import load_medians

base = load_medians(glob.glob(os.path.join(sys.argv[1], 'base-*.csv')))
new = load_medians(glob.glob(os.path.join(sys.argv[1], 'new-*.csv')))
groups = collections.defaultdict(list)
for k in base:
    if k in new and base[k] > 0:
        groups[k[:5]].append(new[k] / base[k])
print('| configuration | op | rows | lowest | median | highest |')
print('|---|---|---|---|---|---|')
for g in sorted(groups):
    r = groups[g]
    print('| %s %s-bit %s %s | %s | %d | %.3f | %.3f | %.3f |' %
          (g[0], g[1], g[2], g[3], g[4], len(r), min(r), statistics.median(r), max(r)))
