#!/usr/bin/env python3
"""The tables of gpu-results.md from one gpu_bench CSV (one run): the
device's ceilings, every configuration at one fill (direct and grouped, the
share of the ceiling that bounds it), and the end-to-end calls.

    test/bench/kernels/gpu-results-tables.py CSV [FILL]      (FILL default 0.50)

Rows whose check failed (ok != 1) are left out; each point of a run is one
median already (gpu_bench --reps N).
"""
import csv
import sys

CEILINGS = [
    ('sector_read', 'random 32-byte sectors, 2 lanes x 16 B, 8 GB buffer'),
    ('sector_read_512M', 'the same in a 512 MB buffer (a table\'s size)'),
    ('sector_read_1thread', 'random 32-byte sectors read by one thread (2 x 16 B)'),
    ('read16', 'random 16-byte reads'),
    ('line_read', 'random 128-byte lines, 8 lanes x 16 B'),
    ('cas8', 'random 8-byte atomicCAS (successful), 8 GB buffer'),
]
E2E = [('e2e_fop', 'find-or-put, inserting'), ('e2e_fop_present', 'find-or-put, all present'),
       ('e2e_find', 'find')]


def main():
    path = sys.argv[1]
    fill = sys.argv[2] if len(sys.argv) > 2 else '0.50'
    rows = [r for r in csv.DictReader(open(path)) if r['ok'] != '0']
    ceiling = {r['op']: float(r['gkeys_s']) for r in rows if r['table'] == 'ceiling'}

    print('Ceilings (G/s):\n')
    print('| what | G/s |')
    print('|---|---|')
    for op, what in CEILINGS:
        if op in ceiling:
            print('| %s | %.2f |' % (what, ceiling[op]))

    # every configuration at the fill: direct and grouped side by side
    points = {}
    order = []
    for r in rows:
        if r['table'] == 'ceiling' or r['op'].startswith('e2e') or r['fill'] != fill or r['ok'] != '1':
            continue
        bits = r['slot_bits'] if r['secondary_bits'] in ('0', r['slot_bits']) else \
            '%s/%s' % (r['slot_bits'], r['secondary_bits'])
        k = (r['table'], r['op'], r['pos'], bits, r['bucket'])
        if k not in points:
            points[k] = {}
            order.append(k)
        bound = ceiling.get('cas8' if r['op'] == 'put' else 'sector_read_512M')
        points[k][r['mode']] = (float(r['gkeys_s']), float(r['gkeys_s']) / bound if bound else None)
    print('\nEvery configuration at fill %s (G keys/s; the share is of the sector ceiling in a '
          '512 MB buffer for finds and find-or-puts, of the CAS ceiling for puts):\n' % fill)
    print('| table | op | pos | slot bits | buckets | direct | grouped | direct, share of ceiling |')
    print('|---|---|---|---|---|---|---|---|')
    for k in order:
        d = points[k].get('direct')
        g = points[k].get('grouped')
        print('| %s | %s | %s | %s | %s | %s | %s | %s |' % (
            k[0], k[1], k[2], k[3], k[4],
            '%.2f' % d[0] if d else '-', '%.2f' % g[0] if g else '-',
            '%.0f%%' % (100 * d[1]) if d and d[1] is not None else '-'))

    e2e = [r for r in rows if r['op'] in dict(E2E)]
    if e2e:
        print('\nEnd to end (host keys through cpht_table_*, wall clock of the call):\n')
        print('| table | call | G keys/s | ms | keys |')
        print('|---|---|---|---|---|')
        for r in e2e:
            bits = r['slot_bits'] if r['secondary_bits'] in ('0', r['slot_bits']) else \
                '%s/%s' % (r['slot_bits'], r['secondary_bits'])
            print('| %s (%s, %s-bit) | %s | %.2f | %.1f | %s |' % (
                r['table'], r['bucket'], bits, dict(E2E)[r['op']], float(r['gkeys_s']),
                float(r['ms']), r['n']))


if __name__ == '__main__':
    main()
