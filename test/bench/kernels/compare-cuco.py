#!/usr/bin/env python3
"""Best against best: for each operation, fill and share of hits, the fastest
cpht configuration of gpu_bench CSVs next to the fastest cuCollections variant
of a cuco_bench CSV of the same run (same keys, same machine).

    test/bench/kernels/compare-cuco.py CUCO_CSV CPHT_CSV...

Medians over every row of a point (the files may hold several rounds); rows
whose check failed (ok != 1, e.g. a put past a table's capacity) are left out.
"""
import sys

from gpu_bench_csv import load_medians


def best(rows, name):
    b = {}
    for k, v in rows.items():
        point = (k[4], k[5], k[6])
        if point not in b or v > b[point][0]:
            b[point] = (v, name(k))
    return b


cuco = best(load_medians(sys.argv[1:2]), lambda k: k[0])
ours = best(load_medians(sys.argv[2:]), lambda k: '%s %s-bit %s %s' % (k[0], k[1], k[2], k[3]))
print('| op | hits | fill | cpht (G keys/s) | configuration | cuCollections | variant | ratio |')
print('|---|---|---|---|---|---|---|---|')
for p in sorted(cuco):
    if p in ours:
        print('| %s | %s | %s | %.2f | %s | %.2f | %s | %.2f× |' %
              (p[0], p[1], p[2], ours[p][0], ours[p][1], cuco[p][0], cuco[p][1], ours[p][0] / cuco[p][0]))
