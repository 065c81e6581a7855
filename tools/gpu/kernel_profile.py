#!/usr/bin/env python3
"""Summarises an Nsight Compute CSV (ncu --csv --metrics gpu__time_duration.sum) of decode steps: the
kernels of the last `--kernels-per-step` launches (one decode step replayed from its graph), grouped by
kernel name, with count, total and mean microseconds, and the step's total kernel time.

  python3 tools/gpu/kernel_profile.py PROFILE.csv --kernels-per-step N [--json OUT.json]
"""
import argparse
import csv
import json
import re
import sys
from collections import OrderedDict


def kernel_name(full):
    """The function's own name: the identifier right before its template arguments or parameters
    (namespaces, '(anonymous namespace)' and '<unnamed>' skipped)."""
    m = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*[<(]", full.replace("(anonymous namespace)", "anon").replace("<unnamed>", "anon"))
    return m.group(1) if m else full


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--kernels-per-step", type=int, required=True)
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    with open(a.csv, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu prints its own log lines before the table
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "nsecond")
        scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3}.get(unit, 1e-3)
        name = kernel_name(r["Kernel Name"])
        if name == "matmul_decode_kernel":  # one line per weight shape: the grid tells them apart
            name += " grid " + r.get("Grid Size", "?").split(",")[0].strip("( ")
        rows.append((int(r["ID"]), name, value * scale))
    rows.sort()
    step = rows[-a.kernels_per_step:]
    groups = OrderedDict()
    for _, name, us in step:
        short = name
        g = groups.setdefault(short, [0, 0.0])
        g[0] += 1
        g[1] += us
    total = sum(us for _, _, us in step)
    print(f"{len(step)} kernels of the last step, {total:.1f} us of kernel time")
    print(f"{'kernel':48s} {'count':>6s} {'total us':>10s} {'mean us':>9s} {'share':>6s}")
    for name, (n, us) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        print(f"{name[:48]:48s} {n:6d} {us:10.1f} {us / n:9.2f} {100 * us / total:5.1f}%")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"kernels": len(step), "kernel_us": total,
                       "by_kernel": {k: {"count": n, "total_us": us} for k, (n, us) in groups.items()}}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
