#!/usr/bin/env python3
"""The compact-hashing paper's code and cpht's kernels, best against best at
no more slot memory, from one run of each on the same GPU: the paper's
`rates` benchmark (its output: milliseconds per operation, one line per
table, operation and hit share per measurement) and gpu_bench's CSV.

    test/bench/kernels/compare-paper.py RATES_OUTPUT GPU_BENCH_CSV [--rows]

Both measure 2^27 primary + 2^24 secondary slots (iceberg) or 2^27 slots
(cuckoo), with the same operations: find = half as many queries as slots,
pos of them hits; put = fill an empty table to the fill; fop = a table
filled to pos, then as many find-or-puts as slots ending at the fill.  The
paper's times become G keys/s with those key counts (the median of its
measurements; a point the table was full at in most of them counts as
full).  At each point the paper's fastest configuration is set
against cpht's fastest one whose slots take no more memory (16-bit
iceberg tables have 32-bit secondary slots in both); "iceberg" and
"cuckoo" set each kind against its own kind.  Prints a summary per kind,
operation and hit share (lowest, median and highest ratio over the
fills, and how many are below the target: 1.3x find and find-or-put,
1.1x put), and with --rows every point.
"""
import collections
import statistics
import sys

from gpu_bench_csv import load_medians

P, S = 1 << 27, 1 << 24
TARGET = {'find': 1.3, 'fop': 1.3, 'put': 1.1}


def slot_bytes(table, bits):
    bits = int(bits)
    if table == 'iceberg':
        return (P * bits + S * (32 if bits == 16 else bits)) // 8
    return P * bits // 8


def paper_points(path):
    """{(table, op, pos, fill): {config: G keys/s}} from rates' output."""
    times = collections.defaultdict(list)
    fills = None
    for line in open(path):
        f = [x.strip() for x in line.split(',')]
        if f[0] == 'table':
            fills = f[6:]
            continue
        if f[0] not in ('iceberg', 'cuckoo') or fills is None:
            continue
        table, op, pos, rw, pbs, sbs = f[:6]
        pos = '-' if op == 'put' else ('%g' % float(pos))
        for fill, ms in zip(fills, f[6:]):
            times[(table, op, pos, '%.2f' % float(fill), rw, '%s/%s' % (pbs, sbs))].append(float(ms))
    out = collections.defaultdict(dict)
    for (table, op, pos, fill, rw, bucket), all_ms in times.items():
        # a point the table was full at in most measurements (nan) is full
        v = [ms for ms in all_ms if ms == ms]
        if 2 * len(v) <= len(all_ms):
            continue
        rows = P + S if table == 'iceberg' else P
        n = {'find': rows // 2, 'put': int(rows * float(fill)), 'fop': rows}[op]
        out[(table, op, pos, fill)][(rw, bucket)] = n / statistics.median(v) / 1e6
    return out


def main():
    rows_wanted = '--rows' in sys.argv
    args = [a for a in sys.argv[1:] if a != '--rows']
    paper = paper_points(args[0])
    ours = collections.defaultdict(dict)
    for (table, bits, bucket, mode, op, pos, fill), v in load_medians(args[1:2]).items():
        if op in TARGET:
            ours[(table, op, pos, fill)][(bits, bucket, mode)] = v
    summary = collections.defaultdict(list)
    lines = []
    for kind in ('any', 'iceberg', 'cuckoo'):
        for op in ('find', 'fop', 'put'):
            pts = sorted({(p[2], p[3]) for p in paper if p[1] == op})
            for pos, fill in pts:
                best_p = None
                for table in ('iceberg', 'cuckoo'):
                    if kind not in ('any', table):
                        continue
                    for (rw, bucket), v in paper.get((table, op, pos, fill), {}).items():
                        if best_p is None or v > best_p[0]:
                            best_p = (v, table, rw, bucket)
                if best_p is None:
                    continue
                mem = slot_bytes(best_p[1], best_p[2])
                best_o = None
                for table in ('iceberg', 'cuckoo'):
                    if kind not in ('any', table):
                        continue
                    for (bits, bucket, mode), v in ours.get((table, op, pos, fill), {}).items():
                        if slot_bytes(table, bits) <= mem and (best_o is None or v > best_o[0]):
                            best_o = (v, table, bits, bucket, mode)
                if best_o is None:
                    continue
                ratio = best_o[0] / best_p[0]
                summary[(kind, op, pos)].append((ratio, fill))
                lines.append('| %s | %s | %s | %s | %.2f | %s %s-bit %s | %.2f | %s %s-bit %s %s | %.2f× |' % (
                    kind, op, pos, fill, best_p[0], best_p[1], best_p[2], best_p[3],
                    best_o[0], best_o[1], best_o[2], best_o[3], best_o[4], ratio))
    print('| tables | op | pos | fills | lowest | median | highest | below target |')
    print('|---|---|---|---|---|---|---|---|')
    for (kind, op, pos), r in summary.items():
        x = [a for a, _ in r]
        below = [f for a, f in r if a < TARGET[op]]
        print('| %s | %s | %s | %d | %.2f× | %.2f× | %.2f× | %s |' % (
            kind, op, pos, len(r), min(x), statistics.median(x), max(x),
            ('%d (%s)' % (len(below), ', '.join(below))) if below else '0'))
    if rows_wanted:
        print()
        print('| tables | op | pos | fill | paper | its configuration | cpht | configuration | ratio |')
        print('|---|---|---|---|---|---|---|---|---|')
        for l in lines:
            print(l)


main()
