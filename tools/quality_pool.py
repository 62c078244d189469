#!/usr/bin/env python3
"""Pools the token-by-token comparisons of several texts (tools/quality_table.py --paired,
one quality*.json per scored text) into one table per weight type.

One text decides a type's borderline tokens by the luck of its words: the paired
difference between two tools on a 3,000-token text moves by a standard error or two
from one text to the next. The texts' tokens are disjoint samples, so the pooled mean
KLD difference is the token-weighted mean of the texts' means, its standard error
sqrt(sum (n_i se_i)^2) / sum n_i, and the McNemar counts (tokens whose base top token
only one tool keeps) add up.

  python3 tools/quality_pool.py WORK/quality.json WORK/quality-GPL-2.json ... [--md OUT]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path


def pool(files: list[Path]) -> tuple[list[str], dict]:
    texts, by_type = [], {}
    for f in files:
        d = json.loads(f.read_text())
        if d["chunks"] != 0:
            raise SystemExit(f"{f}: scored {d['chunks']} chunks; pool whole texts (--chunks 0)")
        if Path(d["text"]).name in texts:
            raise SystemExit(f"{f}: {d['text']} is pooled twice")
        texts.append(Path(d["text"]).name)
        for r in d["rows"]:
            p = r.get("paired")
            if p:
                by_type.setdefault(r["type"], []).append(p)
    rows = {}
    for t, ps in by_type.items():
        n = sum(p["tokens"] for p in ps)
        rows[t] = {
            "texts": len(ps),
            "tokens": n,
            "kld_a": sum(p["kld_a"] * p["tokens"] for p in ps) / n,
            "kld_b": sum(p["kld_b"] * p["tokens"] for p in ps) / n,
            "kld_diff": sum(p["kld_diff"] * p["tokens"] for p in ps) / n,
            "kld_diff_se": math.sqrt(sum((p["kld_diff_se"] * p["tokens"]) ** 2 for p in ps)) / n,
            "same_top_a": sum(p["same_top_a"] for p in ps),
            "same_top_b": sum(p["same_top_b"] for p in ps),
            "only_a": sum(p["same_top_only_a"] for p in ps),
            "only_b": sum(p["same_top_only_b"] for p in ps),
            # Per text, the difference in its own standard errors: the spread across texts.
            "z_per_text": [p["kld_diff"] / p["kld_diff_se"] if p["kld_diff_se"] else 0.0
                           for p in ps],
        }
    return texts, rows


def table(rows: dict) -> list[str]:
    lines = ["| type | texts | scored tokens | mean KLD anymoe / llama.cpp | "
             "KLD anymoe - llama.cpp (paired se) | in se | per text, in se | "
             "same top anymoe / llama.cpp (%) | top token kept by anymoe only / llama.cpp only "
             "| in sd |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for t, r in rows.items():
        z = r["kld_diff"] / r["kld_diff_se"] if r["kld_diff_se"] else 0.0
        only = r["only_a"] + r["only_b"]
        zt = (r["only_a"] - r["only_b"]) / math.sqrt(only) if only else 0.0
        n = r["tokens"]
        lines.append(
            f"| {t} | {r['texts']} | {n} | {r['kld_a']:.5f} / {r['kld_b']:.5f} | "
            f"{r['kld_diff']:+.5f} ({r['kld_diff_se']:.5f}) | {z:+.1f} | "
            f"{' '.join(f'{v:+.1f}' for v in r['z_per_text'])} | "
            f"{100 * r['same_top_a'] / n:.2f} / {100 * r['same_top_b'] / n:.2f} | "
            f"{r['only_a']} / {r['only_b']} | {zt:+.1f} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", type=Path, nargs="+", help="quality*.json of quality_table --paired")
    ap.add_argument("--md", type=Path, help="also write the table here")
    args = ap.parse_args()
    texts, rows = pool(args.files)
    lines = [f"texts: {', '.join(texts)}", ""] + table(rows)
    print("\n".join(lines))
    if args.md:
        args.md.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
