"""Reading gpu_bench and cuco_bench CSVs (compare-ab.py, compare-cuco.py)."""
import collections
import csv
import statistics


def load_medians(paths):
    """{(table, slot_bits, bucket, mode, op, pos, fill): median G keys/s}
    over every row of a point in the files; ceilings and rows whose check
    failed (ok != 1, e.g. a put past a table's capacity) are left out."""
    d = collections.defaultdict(list)
    for p in paths:
        for r in csv.DictReader(open(p)):
            if r['table'] == 'ceiling' or r['ok'] != '1':
                continue
            k = (r['table'], r['slot_bits'], r['bucket'], r['mode'], r['op'], r['pos'], r['fill'])
            d[k].append(float(r['gkeys_s']))
    return {k: statistics.median(v) for k, v in d.items()}
