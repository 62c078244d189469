#!/usr/bin/env python3
"""Where the kernel time of a decode step goes, from an `ncu --csv` log.

Reads the CSV that `ncu --metrics gpu__time_duration.sum --csv` prints for an
`anymoe bench --backend cuda` run (progress lines before the header are
skipped), cuts the kernels into steps (a step starts at the first embedding
kernel after any other kernel: every step embeds its tokens first), and
prints per step the kernel count and time, then per kernel and grid shape the
launches, total and mean time. ncu serialises kernels, flushes caches and
locks clocks at base by default, so the times are each kernel's alone, not
the step's wall time.

    tools/ncu_step_summary.py ncu.csv [--steps 2]
"""

from __future__ import annotations

import argparse
import collections
import csv
import re
import sys

UNITS_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}


def kernel_rows(path: str) -> list[dict]:
    with open(path, newline="") as f:
        lines = f.read().splitlines()
    header = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if header is None:
        sys.exit(f"{path}: no ncu CSV header (\"ID\",...) found")
    rows = [r for r in csv.DictReader(lines[header:]) if r.get("Metric Name") == "gpu__time_duration.sum"]
    if not rows:
        sys.exit(f"{path}: no gpu__time_duration.sum rows")
    return rows


def short_name(kernel: str) -> str:
    return re.sub(r"\(.*", "", kernel).split("::")[-1]


def steps_of(rows: list[dict]) -> list[list[dict]]:
    steps: list[list[dict]] = []
    previous = ""
    for r in rows:
        name = short_name(r["Kernel Name"])
        if not steps or ("Embedding" in name and "Embedding" not in previous):
            steps.append([])
        steps[-1].append(r)
        previous = name
    return steps


def microseconds(r: dict) -> float:
    return float(r["Metric Value"].replace(",", "")) * UNITS_US[r["Metric Unit"]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--steps", type=int, default=2, help="steps to break down (the first is a warm-up)")
    args = ap.parse_args()
    steps = steps_of(kernel_rows(args.csv))
    for i, step in enumerate(steps):
        print(f"step {i}: {len(step)} kernels, {sum(map(microseconds, step)):.0f} us of kernel time")
    for i, step in enumerate(steps[:args.steps]):
        total = sum(map(microseconds, step))
        by_kernel = collections.defaultdict(list)
        for r in step:
            by_kernel[(short_name(r["Kernel Name"]), r["Grid Size"], r["Block Size"])].append(microseconds(r))
        print(f"\nstep {i}: kernel, grid, block: launches, total us (% of the step), mean us")
        for (name, grid, block), times in sorted(by_kernel.items(), key=lambda kv: -sum(kv[1])):
            print(f"  {name:28s} {grid:>14s} {block:>12s} {len(times):5d} {sum(times):9.0f} "
                  f"({100 * sum(times) / total:4.1f} %) {sum(times) / len(times):8.1f}")


if __name__ == "__main__":
    main()
