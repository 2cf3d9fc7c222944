"""Summarises an `ncu --csv --metrics gpu__time_duration.sum` log (the gpu-check's ncu stage): GPU
time per kernel, launches, microseconds a launch and share of the step, largest first, as a
Markdown table, then one line "ncu: NAME: N launches, T us of GPU time" for the check's table.

    python3 ncu_summary.py NAME FILE.csv
"""
import csv
import sys

name, path = sys.argv[1], sys.argv[2]
rows, header = [], None
with open(path, newline="") as f:
    for rec in csv.reader(f):
        if rec and rec[0] == "ID":
            header = rec
            continue
        if header and len(rec) == len(header) and rec[0].isdigit():
            rows.append(dict(zip(header, rec)))
per = {}
for r in rows:
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    ns = float(r["Metric Value"].replace(",", ""))
    unit = r.get("Metric Unit", "ns")
    ns *= {"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6}.get(unit, 1)
    k = per.setdefault(r["Kernel Name"], [0, 0.0])
    k[0] += 1
    k[1] += ns
total = sum(v[1] for v in per.values())
print(f"| {name}: kernel | launches | us a launch | total us | share |")
print("|---|---:|---:|---:|---:|")
for k, (n, ns) in sorted(per.items(), key=lambda kv: -kv[1][1]):
    print(f"| {k} | {n} | {ns / n / 1e3:.1f} | {ns / 1e3:.0f} | {100 * ns / total if total else 0:.1f} % |")
print(f"ncu: {name}: {sum(v[0] for v in per.values())} launches, {total / 1e3:.0f} us of GPU time")
sys.exit(0 if per else 1)
