#!/usr/bin/env python3
"""Summarises tools/bench_side_by_side.sh output: per file and test, the median
and spread (min-max) of the per-run mean t/s of each engine, and the ratio of
medians. Standard library only.
  tools/bench_summary.py OUT_DIR"""
import json
import pathlib
import statistics
import sys
from collections import defaultdict


def main(out_dir: str) -> None:
    runs = defaultdict(list)  # (file, test, engine) -> [avg_ts]
    for path in sorted(pathlib.Path(out_dir).glob("*-r*.json")):
        engine = path.name.split("-", 1)[0]
        for test in json.loads(path.read_text()):
            name = pathlib.Path(test["model_filename"]).name
            kind = f"pp{test['n_prompt']}" if test["n_gen"] == 0 else f"tg{test['n_gen']}"
            runs[(name, kind, engine)].append(test["avg_ts"])
    files = sorted({k[0] for k in runs})
    print("| file | test | llama.cpp t/s median (min-max) | anymoe t/s median (min-max) | ratio |")
    print("|---|---|---:|---:|---:|")
    for f in files:
        for kind in ("pp128", "tg64"):
            a, l = runs.get((f, kind, "anymoe")), runs.get((f, kind, "llama"))
            if not a or not l:
                continue
            ma, ml = statistics.median(a), statistics.median(l)
            print(f"| `{f}` | {kind} | {ml:.1f} ({min(l):.1f}-{max(l):.1f}) | "
                  f"{ma:.1f} ({min(a):.1f}-{max(a):.1f}) | {ma / ml:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1])
