#!/usr/bin/env python3
"""Two builds of gpu_bench run alternately on one machine (ab-gpu.sh): the
ratio NEW / BASE of each row's median, summarised per configuration and
operation (lowest, median and highest over its fills and hit shares).

    test/bench/compare-ab.py OUT_DIR        (the folder ab-gpu.sh wrote)
"""
import collections
import csv
import glob
import os
import statistics
import sys


def load(prefix):
    d = collections.defaultdict(list)
    for p in glob.glob(prefix + '-*.csv'):
        for r in csv.DictReader(open(p)):
            if r['table'] == 'ceiling' or r['ok'] != '1':
                continue
            k = (r['table'], r['slot_bits'], r['bucket'], r['mode'], r['op'], r['pos'], r['fill'])
            d[k].append(float(r['gkeys_s']))
    return {k: statistics.median(v) for k, v in d.items()}


base = load(os.path.join(sys.argv[1], 'base'))
new = load(os.path.join(sys.argv[1], 'new'))
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
