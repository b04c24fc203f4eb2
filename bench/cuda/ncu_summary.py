"""Summarises an `ncu --csv` metrics dump: time and DRAM bandwidth per kernel name (device_run.sh)."""
import collections
import csv
import sys

rows = collections.defaultdict(lambda: {"n": 0, "ns": 0.0, "rd": 0.0, "wr": 0.0})
launches = {}
with open(sys.argv[1], newline="") as f:
    lines = [l for l in f if l.startswith('"')]
for r in csv.DictReader(lines):
    name = r["Kernel Name"].split("(")[0][:60]
    key = (r["ID"], name)
    if key not in launches:
        launches[key] = True
        rows[name]["n"] += 1
    v = float(r["Metric Value"].replace(",", "") or 0)
    m = r["Metric Name"]
    if m == "gpu__time_duration.sum":
        rows[name]["ns"] += v
    elif m == "dram__bytes_read.sum":
        rows[name]["rd"] += v
    elif m == "dram__bytes_write.sum":
        rows[name]["wr"] += v
total = sum(x["ns"] for x in rows.values())
print(f"{len(launches)} kernels, {total / 1e3:.1f} us in total")
print(f"{'kernel':60s} {'launches':>8s} {'us':>9s} {'us/launch':>9s} {'GB/s':>7s} {'MB read':>8s}")
for name, x in sorted(rows.items(), key=lambda kv: -kv[1]["ns"])[:25]:
    gbs = (x["rd"] + x["wr"]) / x["ns"] if x["ns"] else 0
    print(f"{name:60s} {x['n']:8d} {x['ns'] / 1e3:9.1f} {x['ns'] / 1e3 / x['n']:9.2f} {gbs:7.0f} {x['rd'] / 1e6:8.1f}")
