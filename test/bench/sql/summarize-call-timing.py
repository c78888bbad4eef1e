#!/usr/bin/env python3
"""Medians of the cpht.trace lines of sql-call-timing.sql, per labelled case:
read array / table call / result (ms), then inside the table call: staging
keys / waiting for the device / copying results / undo log (ms)."""
import re,sys,statistics
label=None; rows={}
for line in open(sys.argv[1]):
    m=re.match(r'== (.*)',line.strip())
    if m and not m.group(1).startswith('rep'): label=m.group(1); continue
    m=re.search(r'read array ([\d.]+) ms, table ([\d.]+) ms, result ([\d.]+) ms',line)
    if m and label: rows.setdefault(label,[]).append(tuple(map(float,m.groups())))
    m=re.search(r'staging keys ([\d.]+) ms, waiting for the device ([\d.]+) ms, copying results ([\d.]+) ms, undo log ([\d.]+) ms',line)
    if m and label: rows.setdefault(label+' (inside)',[]).append(tuple(map(float,m.groups())))
for k,v in rows.items():
    med=[statistics.median(c) for c in zip(*v)]
    print(f"{k}: n={len(v)} medians={['%.1f'%x for x in med]}" + (f" whole={sum(med):.1f} ms = {50/sum(med):.2f} G keys/s" if '(inside)' not in k else ''))
