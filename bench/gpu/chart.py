#!/usr/bin/env python3
"""chart.py — draw a gpu-bench log as one self-contained HTML page (inline SVG, no libraries).

    python3 bench/gpu/chart.py bench/gpu/results/h200-bench-headline.log OUT.html

Bars: batch-1 decode tok/s of every path the log measured, per weight format, with the issue's
target and the bandwidth ceiling (the log's roofline) drawn as lines; then the 32-layer chains of
linear layers in TB/s against the measured copy bandwidth.
"""
import html
import re
import sys

log = open(sys.argv[1]).read()
out = sys.argv[2]

paths = {}  # fmt -> [(label, tok/s)]
for m in re.finditer(r"decode batch 1 \((bf16|INT8|INT4), graphs\) (fused|unfused)(.*?): ([0-9.]+) tok/s", log):
    fmt, kind, rest, tps = m.group(1).upper(), m.group(2), m.group(3), float(m.group(4))
    label = kind + rest.replace(", TMA", "").replace("block(s)/SM", "blk/SM")
    paths.setdefault(fmt, []).append((label.strip(" ,"), tps))
ceil = {}
for fmt, key in (("BF16", "BF16"), ("INT8", "INT8 weights"), ("INT4", "INT4 weights")):
    m = re.search(r"decode b=1 %s \(tok/s\)\s+([0-9.]+)\s+>=(\d+)\s+\d+\s+.*?= ?([0-9]+) tok/s ceiling|"
                  r"decode b=1 %s \(tok/s\)\s+([0-9.]+)\s+>=(\d+)\s+\d+\s+.*?-> ([0-9]+) tok/s ceiling"
                  % (key, key), log)
    if m:
        g = [x for x in m.groups() if x is not None]
        ceil[fmt] = (float(g[0]), float(g[1]), float(g[2]))
chains = [(m.group(1) + " " + m.group(2), float(m.group(3)))
          for m in re.finditer(r"GEMV chain (bf16|int8|int4) (.*?): [0-9.]+ ms/token, ([0-9.]+) TB/s", log)]
copy = re.search(r"device copy ([0-9.]+) TB/s", log)
copy = float(copy.group(1)) if copy else 0.0


def bars(title, rows, vmax, lines, unit, w=760):
    rh, left = 22, 330
    h = 40 + rh * len(rows) + 30
    sc = (w - left - 60) / vmax
    s = ['<svg width="%d" height="%d" font-family="sans-serif" font-size="12">' % (w, h),
         '<text x="4" y="18" font-size="14" font-weight="bold">%s</text>' % html.escape(title)]
    for i, (label, v) in enumerate(rows):
        y = 32 + i * rh
        s.append('<text x="%d" y="%d" text-anchor="end">%s</text>' % (left - 6, y + 14, html.escape(label)))
        s.append('<rect x="%d" y="%d" width="%.1f" height="%d" fill="#4a7ab5"/>' % (left, y + 2, v * sc, rh - 6))
        s.append('<text x="%.1f" y="%d">%.1f</text>' % (left + v * sc + 4, y + 14, v))
    for name, v, color in lines:
        x = left + v * sc
        s.append('<line x1="%.1f" y1="28" x2="%.1f" y2="%d" stroke="%s" stroke-dasharray="4 3"/>'
                 % (x, x, h - 24, color))
        s.append('<text x="%.1f" y="%d" fill="%s">%s %.0f %s</text>' % (x + 2, h - 10, color, name, v, unit))
    s.append("</svg>")
    return "\n".join(s)


parts = ["<!doctype html><meta charset=utf-8><title>frugal gpu-bench</title>",
         "<h2>frugal CUDA backend: Llama-3-8B shape, batch-1 decode</h2>",
         "<p>From %s.</p>" % html.escape(sys.argv[1])]
for fmt in ("BF16", "INT8", "INT4"):
    rows = paths.get(fmt, [])
    if not rows:
        continue
    lines = []
    if fmt in ceil:
        lines = [("target", ceil[fmt][1], "#c0392b"), ("ceiling", ceil[fmt][2], "#555")]
    vmax = max([v for _, v in rows] + [l[1] for l in lines]) * 1.05
    parts.append(bars("%s weights: tok/s by path" % fmt, rows, vmax, lines, "tok/s"))
if chains:
    parts.append(bars("32-layer chain of linear layers (one graph): TB/s", chains,
                      max([v for _, v in chains] + [copy]) * 1.05,
                      [("device copy", copy, "#555")] if copy else [], "TB/s"))
open(out, "w").write("\n".join(parts) + "\n")
print("wrote %s: %d formats, %d chains" % (out, len(paths), len(chains)))
