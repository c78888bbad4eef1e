#!/usr/bin/env python3
"""plot-ingest.py — statement time against staging rows for each ingest
pattern, from the CSVs ingest-bench.sh writes (one run per row count), as
an SVG with logarithmic axes.  Needs nothing beyond Python's standard
library.

    test/bench/plot-ingest.py OUT.svg results/ingest-*.csv

Each pattern is one line through its medians; PostgreSQL's own ways
(count, anti-join, ON CONFLICT, the floor of a load) are drawn dashed, so
cpht's patterns read against them.
"""
import csv
import math
import sys
from xml.sax.saxutils import escape

NATIVE = ("count_parallel", "count_serial", "anti_join", "on_conflict",
          "load_floor", "seed_count_parallel")
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
           "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939",
           "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354"]


def read(paths):
    """{pattern: {rows: median seconds}} and the device named in the CSVs."""
    series, devices = {}, set()
    for path in paths:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if not row["median_s"]:
                    continue            # n/a rows
                series.setdefault(row["pattern"], {})[int(row["rows"])] = float(row["median_s"])
                devices.add(row["device"])
    return series, devices


def ticks(lo, hi):
    """Powers of ten and their 2x and 5x between lo and hi."""
    out = []
    for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            v = m * 10 ** e
            if lo <= v <= hi:
                out.append(v)
    return out


def label(v):
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= div:
            return f"{v / div:g}{unit}"
    return f"{v:g}"


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: plot-ingest.py OUT.svg INGEST.csv ...")
    series, devices = read(sys.argv[2:])
    if not series:
        sys.exit("plot-ingest: no timed rows in the CSVs")
    xs = [r for s in series.values() for r in s]
    ys = [t for s in series.values() for t in s.values()]
    xlo, xhi = min(xs) / 1.3, max(xs) * 1.3
    ylo, yhi = min(ys) / 1.5, max(ys) * 1.5
    w, h, left, right, top, bottom = 1000, 620, 70, 260, 40, 50
    pw, ph = w - left - right, h - top - bottom

    def px(x):
        return left + pw * (math.log(x) - math.log(xlo)) / (math.log(xhi) - math.log(xlo))

    def py(y):
        return top + ph * (1 - (math.log(y) - math.log(ylo)) / (math.log(yhi) - math.log(ylo)))

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{left}" y="22" font-size="15">Ingest statements: seconds against staging rows '
           f'({escape(", ".join(sorted(devices)))})</text>']
    for v in ticks(xlo, xhi):
        out.append(f'<line x1="{px(v):.1f}" y1="{top}" x2="{px(v):.1f}" y2="{top + ph}" stroke="#ddd"/>')
        out.append(f'<text x="{px(v):.1f}" y="{top + ph + 16}" text-anchor="middle">{label(v)}</text>')
    for v in ticks(ylo, yhi):
        out.append(f'<line x1="{left}" y1="{py(v):.1f}" x2="{left + pw}" y2="{py(v):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="black"/>')
    out.append(f'<text x="{left + pw / 2}" y="{h - 10}" text-anchor="middle">staging rows (log)</text>')
    out.append(f'<text x="16" y="{top + ph / 2}" transform="rotate(-90 16 {top + ph / 2})" '
               'text-anchor="middle">seconds (log)</text>')
    for i, name in enumerate(sorted(series, key=lambda n: (n not in NATIVE, n))):
        colour = COLOURS[i % len(COLOURS)]
        pts = sorted(series[name].items())
        dash = ' stroke-dasharray="6,4"' if name in NATIVE else ""
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
        for x, y in pts:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}"/>')
        ly = top + 14 + 18 * i
        out.append(f'<line x1="{left + pw + 14}" y1="{ly - 4}" x2="{left + pw + 40}" y2="{ly - 4}" '
                   f'stroke="{colour}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{left + pw + 46}" y="{ly}">{escape(name)}</text>')
    out.append("</svg>")
    with open(sys.argv[1], "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"wrote {sys.argv[1]}: {len(series)} patterns")


if __name__ == "__main__":
    main()
