#!/usr/bin/env python3
"""The quality table of docs/quality.md: SmolLM2-135M requantised from one f16 base to
every weight type, measured by `anymoe perplexity` and llama.cpp's llama-perplexity side
by side on the same files.

  1. f16 base: llama-quantize --allow-requantize of the default model (Q4_1, the only
     SmolLM2 file a registry ships) to F16: the Q4_1 values exactly, as f16.
  2. importance matrix: llama-imatrix on the base over other licence texts of
     /usr/share/common-licenses (Apache-2.0, MPL-2.0, Artistic, GFDL-1.3), not the GPL-3
     text that is scored.
  3. every type: llama-quantize --imatrix from the base (MXFP4: Q8_0 with every block
     tensor overridden to mxfp4, since the MXFP4_MOE ftype only touches experts).
  4. per tool, a base run on the f16 file saving its log-probabilities
     (--kl-divergence-base), then --kl-divergence of every file against it: PPL, mean
     KLD, 99th / 99.9th percentile KLD, same top token. bits/weight over every tensor.
  5. with --paired, per tool one more run of every file saving its own log-probabilities,
     and tools/kld_pairs.py on the four files: the token-by-token difference between
     the tools (mean KLD difference with its paired standard error; tokens whose top
     token only one tool keeps), so that "worse" can be told from the luck of the text.

SmolLM2's hidden size 576 is not a multiple of 256, so llama-quantize gives the
576-wide rows of the k- and i-quant files a 32-block fallback type (the table lists
what each file holds); only ffn_down (1536 wide) gets the named type there.

Run (repo root): tools/.venv/bin/python tools/quality_table.py --llama-cpp /work/ext/llama.cpp \
    --anymoe build/src/anymoe --work /work/ext/quality [--chunks 8] [--ctx 512] [--paired]
(--chunks 0: every chunk of the text.)
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

import kld_pairs

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
TEXT = "/usr/share/common-licenses/GPL-3"
CALIBRATION = ["Apache-2.0", "MPL-2.0", "Artistic", "GFDL-1.3"]
TYPES = ["Q8_0", "Q6_K", "Q5_1", "Q5_0", "Q4_K_M", "Q4_0", "IQ4_XS", "IQ4_NL", "Q3_K_M", "IQ3_S",
         "IQ3_XXS", "Q2_K", "IQ2_S", "IQ2_XS", "IQ2_XXS", "IQ1_M", "IQ1_S", "MXFP4"]


def sh(cmd: list, **kw) -> str:
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, errors="replace",
                       **kw)
    if p.returncode != 0:
        raise SystemExit(f"failed: {' '.join(map(str, cmd))}\n{(p.stdout + p.stderr)[-3000:]}")
    return p.stdout + p.stderr


def bits_and_types(path: Path) -> tuple[float, dict]:
    from gguf import GGUFReader

    r = GGUFReader(str(path))
    bits = elems = 0
    types: dict[str, int] = {}
    for t in r.tensors:
        bits += int(t.n_bytes) * 8
        elems += int(t.n_elements)
        types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
    return bits / elems, types


def number(pattern: str, text: str) -> float | None:
    m = re.search(pattern, text)
    return float(m.group(1)) if m else None


def parse(text: str) -> dict:
    """Both tools print these lines (anymoe mirrors llama-perplexity's wording)."""
    return {
        "ppl": number(r"Mean PPL\(Q\)\s*:\s*([\d.]+)", text) or number(r"PPL = ([\d.]+)", text),
        "kld": number(r"Mean\s+KLD:\s*([\d.]+)", text),
        "kld_p99": number(r"99\.0%\s+KLD:\s*([\d.]+)", text),
        "kld_p999": number(r"99\.9%\s+KLD:\s*([\d.]+)", text),
        "same_top": number(r"Same top p:\s*([\d.]+)", text),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-cpp", type=Path, required=True)
    ap.add_argument("--anymoe", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--chunks", type=int, default=8, help="0: all")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--text", default=TEXT, help="the scored text (default: the GPL-3)")
    ap.add_argument("--types", nargs="*", default=TYPES)
    ap.add_argument("--reuse-llama", action="store_true",
                    help="take llama-perplexity's rows from the work folder's quality.json "
                         "(same files, chunks and context) and rerun anymoe only")
    ap.add_argument("--paired", action="store_true",
                    help="also compare the tools token by token (tools/kld_pairs.py)")
    args = ap.parse_args()
    if args.paired and args.reuse_llama:
        raise SystemExit("--paired reruns llama-perplexity; drop --reuse-llama")
    bin_dir = args.llama_cpp.resolve() / "build" / "bin"
    anymoe = args.anymoe.resolve()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    t = str(args.threads)

    base = work / "smollm2-f16.gguf"
    if not base.exists():
        sh([bin_dir / "llama-quantize", "--allow-requantize", SOURCE, base, "F16", t])
    calib = work / "calibration.txt"
    calib.write_text("\n\n".join(Path("/usr/share/common-licenses", n).read_text()
                                 for n in CALIBRATION))
    imatrix = work / "smollm2.imatrix.gguf"
    if not imatrix.exists():
        sh([bin_dir / "llama-imatrix", "-m", base, "-f", calib, "-c", "512", "-o", imatrix,
            "-t", t])

    files = {"F16": base}
    for q in args.types:
        dst = work / f"smollm2-{q}.gguf"
        if not dst.exists():
            if q == "MXFP4":
                sh([bin_dir / "llama-quantize", "--imatrix", imatrix, "--tensor-type",
                    r"blk\..*=mxfp4", base, dst, "Q8_0", t])
            else:
                sh([bin_dir / "llama-quantize", "--allow-requantize", "--imatrix", imatrix, base,
                    dst, q, t])
        files[q] = dst

    common = ["-c", args.ctx, "-t", t]
    text = args.text
    # Results per scored text: quality.json / .md for the GPL-3, quality-NAME.* for others.
    name = "quality" if text == TEXT else f"quality-{Path(text).name}"
    chunks = ["--chunks", args.chunks] if args.chunks > 0 else []
    earlier = {}
    if args.reuse_llama:
        prev = json.loads((work / f"{name}.json").read_text())
        if (prev["chunks"], prev["ctx"], prev["text"]) != (args.chunks, args.ctx, args.text):
            raise SystemExit(f"--reuse-llama: {name}.json was run with other --chunks/--ctx/--text")
        earlier = {r["type"]: r["llama"] for r in prev["rows"]}
    a_base, l_base = work / "anymoe-f16.kld", work / "llama-f16.kld"
    rows = []
    for label, path in files.items():
        bpw, types = bits_and_types(path)
        row = {"type": label, "bits_per_weight": bpw, "tensor_types": types}
        if label == "F16":
            row["anymoe"] = parse(sh([anymoe, "perplexity", "-m", path, "-f", text, *chunks,
                                      "--kl-divergence-base", a_base, *common]))
            row["anymoe_exact"] = parse(sh([anymoe, "perplexity", "-m", path, "-f", text,
                                            *chunks, "--exact", "--kv-type", "f32", *common]))
            row["llama"] = earlier.get(label) or parse(sh([
                bin_dir / "llama-perplexity", "-m", path, "-f", text, *chunks,
                "--kl-divergence-base", l_base, *common]))
        else:
            row["anymoe"] = parse(sh([anymoe, "perplexity", "-m", path, "--kl-divergence",
                                      "--kl-divergence-base", a_base, *common]))
            row["llama"] = earlier.get(label) or parse(sh([
                bin_dir / "llama-perplexity", "-m", path, "--kl-divergence",
                "--kl-divergence-base", l_base, *common]))
            if args.paired:
                # Each tool's own run of this file, saved as the base files are, then
                # compared token by token; the files (~100 KiB a token) go at once.
                a_run, l_run = work / "anymoe-run.kld", work / "llama-run.kld"
                sh([anymoe, "perplexity", "-m", path, "-f", text, *chunks,
                    "--kl-divergence-base", a_run, *common])
                sh([bin_dir / "llama-perplexity", "-m", path, "-f", text, *chunks,
                    "--kl-divergence-base", l_run, *common])
                p = row["paired"] = kld_pairs.compare(a_base, a_run, l_base, l_run)
                a_run.unlink()
                l_run.unlink()
                # The pairs are recomputed from 16-bit rows: they must agree with what
                # each tool printed from its f32 logits, else the comparison is wrong.
                # Same-top counts may differ by the one token whose two top logits
                # the rounding ties or unties (0.13 points on a 765-token text).
                for tool, kld, top in (("anymoe", p["kld_a"], p["same_top_a"]),
                                       ("llama", p["kld_b"], p["same_top_b"])):
                    own = row[tool]
                    if (own["kld"] is None or own["same_top"] is None or
                            abs(kld - own["kld"]) > 0.01 * own["kld"] + 2e-5 or
                            abs(top - own["same_top"] * p["tokens"] / 100) > 1.05):
                        raise SystemExit(f"{label}: kld_pairs' {tool} figures ({kld:.6f}, "
                                         f"{top} same top) differ from its own ({own})")
        print(json.dumps(row), flush=True)
        rows.append(row)
    (work / f"{name}.json").write_text(json.dumps(
        {"chunks": args.chunks, "ctx": args.ctx, "text": text, "rows": rows}, indent=1) + "\n")

    def f(v, fmt):
        return "-" if v is None else format(v, fmt)
    lines = ["| type | bits/weight | PPL anymoe | PPL llama.cpp | KLD anymoe | KLD llama.cpp | "
             "KLD p99 anymoe / llama.cpp | same top anymoe / llama.cpp (%) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        a, l = r["anymoe"], r["llama"]
        lines.append(f"| {r['type']} | {r['bits_per_weight']:.2f} | {f(a['ppl'], '.4f')} | "
                     f"{f(l['ppl'], '.4f')} | {f(a['kld'], '.5f')} | {f(l['kld'], '.5f')} | "
                     f"{f(a['kld_p99'], '.4f')} / {f(l['kld_p99'], '.4f')} | "
                     f"{f(a['same_top'], '.2f')} / {f(l['same_top'], '.2f')} |")
    if args.paired:
        lines += ["", "| type | scored tokens | KLD anymoe - llama.cpp (paired se) | "
                  "in se | top token kept by anymoe only / llama.cpp only | in sd |",
                  "|---|---|---|---|---|---|"]
        for r in rows:
            p = r.get("paired")
            if p:
                z = p["kld_diff"] / p["kld_diff_se"] if p["kld_diff_se"] else 0.0
                only = p["same_top_only_a"] - p["same_top_only_b"]
                zt = only / p["same_top_diff_se"] if p["same_top_diff_se"] else 0.0
                lines.append(f"| {r['type']} | {p['tokens']} | {p['kld_diff']:+.5f} "
                             f"({p['kld_diff_se']:.5f}) | {z:+.1f} | {p['same_top_only_a']} / "
                             f"{p['same_top_only_b']} | {zt:+.1f} |")
    (work / f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
