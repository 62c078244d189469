#!/usr/bin/env python3
"""Summarises tools/bench_side_by_side.sh output: per file, test and anymoe
variant (anymoe, or anymoe_<cpu target>) and reference engine (llama.cpp, and
ik_llama.cpp where the runs include it), the median and spread (min-max) of
the per-run mean t/s of each engine and the ratio of medians (tests at a depth,
llama-bench -d, apart: "pp512 @ d4096"); where the anymoe
runs measured the decode roofline (--membw), each engine's tg64 as % of it
(the median roofline over those runs). Standard library only.
  tools/bench_summary.py OUT_DIR"""
import json
import pathlib
import statistics
import sys
from collections import defaultdict


def order(kind: str) -> tuple:
    """pp before tg, then by depth ("pp512 @ d4096": depth 4096), then size."""
    test, _, depth = kind.partition(" @ d")
    return (test[:2] != "pp", int(depth or 0), int(test[2:]))


def main(out_dir: str) -> None:
    runs = defaultdict(list)  # (file, test, engine) -> [avg_ts]
    roofline = defaultdict(list)  # (file, engine) -> [roofline t/s]
    for path in sorted(pathlib.Path(out_dir).glob("*-r*.json")):
        # ENGINE@FILE-rN.json (ENGINE-FILE-rN.json before targets had names with "-").
        engine = path.name.split("@", 1)[0] if "@" in path.name else path.name.split("-", 1)[0]
        for test in json.loads(path.read_text()):
            name = pathlib.Path(test["model_filename"]).name
            kind = f"pp{test['n_prompt']}" if test["n_gen"] == 0 else f"tg{test['n_gen']}"
            if test.get("n_depth", 0):
                kind += f" @ d{test['n_depth']}"
            runs[(name, kind, engine)].append(test["avg_ts"])
            if "roofline_ts" in test:
                roofline[(name, engine)].append(test["roofline_ts"])
    files = sorted({k[0] for k in runs})
    variants = sorted({k[2] for k in runs if k[2].startswith("anymoe")})
    label = {v: "anymoe" if v == "anymoe" else f"anymoe `{v.split('_', 1)[1]}`" for v in variants}
    references = {"llama": "llama.cpp", "ik": "ik_llama.cpp -rtr 1"}
    print("| file | test | reference | reference t/s median (min-max) | anymoe t/s median (min-max) "
          "| ratio | reference % roofline | anymoe % roofline |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for f in files:
        for v in variants:
            for kind in sorted({k[1] for k in runs if k[0] == f}, key=order):
                for ref, ref_label in references.items():
                    a, l = runs.get((f, kind, v)), runs.get((f, kind, ref))
                    if not a or not l:
                        continue
                    ma, ml = statistics.median(a), statistics.median(l)
                    roof = roofline.get((f, v))
                    pct_l = pct_a = ""
                    if kind.startswith("tg") and roof:
                        bound = statistics.median(roof)
                        pct_l, pct_a = f"{100 * ml / bound:.0f} %", f"{100 * ma / bound:.0f} %"
                    print(f"| `{f}` | {kind} | {ref_label} | {ml:.1f} ({min(l):.1f}-{max(l):.1f}) "
                          f"| {label[v]} {ma:.1f} ({min(a):.1f}-{max(a):.1f}) | {ma / ml:.2f} "
                          f"| {pct_l} | {pct_a} |")

if __name__ == "__main__":
    main(sys.argv[1])
