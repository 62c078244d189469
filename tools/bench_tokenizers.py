#!/usr/bin/env python3
"""Encode speed of anymoe's tokenizers against HF `tokenizers` (Rust, through its
Python binding) and tiktoken on real files, one thread, 1 MiB of mixed text.

anymoe's side is bench/tokenizer_real_bench.cc in kernel_bench (Google
Benchmark); this script builds the same text (corpus_large.json's strings
joined by '\\n', repeated to 1 MiB, cut at a character boundary), runs each
case in turn in every round (anymoe, then the reference, so a loaded machine
slows both alike), checks that both give the same number of tokens on the
whole text, and prints tokens/s with the ratio, medians and min-max over the
rounds. Both sides count CPU time (Google Benchmark's default; process_time
here, one thread), which a loaded machine stretches less than wall time. References, one thread (TOKENIZERS_PARALLELISM=false, RAYON_NUM_THREADS=1):
  deepseek-v3, llama3, qwen2, sentencepiece: tokenizers.Tokenizer.from_file on
      the same file, encode() of the whole text; also encode_batch() of its
      lines (another split of the text, so another token count: speed only)
  kimi-k2: tiktoken.Encoding with the Kimi K2 pattern over the same ranks, and
      the 256 reserved special tokens as the loader names them without a
      tokenizer_config.json; encode(text, allowed_special="all")
Special tokens written in the text are parsed on every side.

Usage (after tools/fetch_real_tokenizers.py and building kernel_bench):
  /work/venv-ref/bin/python tools/bench_tokenizers.py [--rounds 3] [--bench build/kernel_bench]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"

import tiktoken  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_real_tokenizer_golden import KIMI_PATTERN, read_ranks  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "golden", "tokenizer")
REAL = os.path.join(ROOT, "models", "real-tokenizers")

HF_CASES = {
    "deepseek-v3": os.path.join(REAL, "deepseek-v3", "tokenizer.json"),
    "llama3": os.path.join(REAL, "llama3", "tokenizer.json"),
    "qwen2": os.path.join(GOLDEN, "qwen2.tokenizer.json"),
    "sentencepiece": os.path.join(GOLDEN, "mixtral.tokenizer.json"),
}
KIMI_RANKS = os.path.join(REAL, "qwen-tiktoken", "tiktoken.model")


def mixed_text(once=False):
    corpus = json.load(open(os.path.join(GOLDEN, "corpus_large.json"), encoding="utf-8"))
    joined = "".join(c["text"] + "\n" for c in corpus["cases"]).encode("utf-8")
    if once:
        return joined.decode("utf-8")
    limit = 1 << 20
    data = joined * (limit // len(joined) + 1)
    cut = limit
    while cut > 0 and (data[cut] & 0xC0) == 0x80:
        cut -= 1
    return data[:cut].decode("utf-8")


def references():
    """name -> (whole-text encode, batch encode or None)."""
    out = {}
    for name, path in HF_CASES.items():
        if os.path.exists(path):
            tok = Tokenizer.from_file(path)
            out[name] = (lambda t, tok=tok: len(tok.encode(t, add_special_tokens=False).ids),
                         lambda lines, tok=tok: sum(len(e.ids) for e in tok.encode_batch(
                             lines, add_special_tokens=False)))
    if os.path.exists(KIMI_RANKS):
        ranks = read_ranks(KIMI_RANKS)
        base = len(ranks)
        specials = {f"<|reserved_token_{base + i}|>": base + i for i in range(256)}
        enc = tiktoken.Encoding(name="kimi-k2", pat_str=KIMI_PATTERN, mergeable_ranks=ranks,
                                special_tokens=specials)
        out["kimi-k2"] = (lambda t: len(enc.encode(t, allowed_special="all")), None)
    return out


def best_time(fn, arg, repeats):
    best, result = None, None
    for _ in range(repeats):
        start = time.process_time()
        result = fn(arg)
        elapsed = time.process_time() - start
        best = elapsed if best is None else min(best, elapsed)
    return best, result


def run_anymoe(bench, name, text_file):
    env = dict(os.environ)
    if text_file:
        env["ANYMOE_BENCH_TOKENIZER_TEXT"] = text_file
    out = subprocess.run(
        [bench, "--benchmark_filter=^BM_EncodeMixed1MiB/" + name + "$",
         "--benchmark_repetitions=3", "--benchmark_format=json"],
        check=True, capture_output=True, text=True, env=env).stdout
    runs = [b for b in json.loads(out)["benchmarks"] if b.get("run_type") == "iteration"]
    if not runs:
        raise SystemExit(f"kernel_bench has no BM_EncodeMixed1MiB/{name} (files absent?)")
    return max(r["tokens_per_s"] for r in runs), int(runs[0]["tokens"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bench", default=os.path.join(ROOT, "build", "kernel_bench"))
    parser.add_argument("--once", action="store_true",
                        help="the corpus once (~290 KB, no repeats) instead of 1 MiB: "
                             "what caching repeated pieces adds")
    args = parser.parse_args()
    text = mixed_text(args.once)
    text_file = None
    tmp = tempfile.TemporaryDirectory()
    if args.once:
        text_file = os.path.join(tmp.name, "text")
        with open(text_file, "wb") as f:
            f.write(text.encode("utf-8"))
    lines = text.split("\n")
    refs = references()
    rows = {name: {"anymoe": [], "ref": [], "batch": []} for name in refs}
    for r in range(args.rounds):
        for name, (whole, batch) in refs.items():
            ours, our_tokens = run_anymoe(args.bench, name, text_file)
            seconds, ref_tokens = best_time(whole, text, 3)
            if ref_tokens != our_tokens:
                raise SystemExit(f"{name}: {our_tokens} tokens from anymoe, {ref_tokens} from the reference")
            rows[name]["anymoe"].append(ours)
            rows[name]["ref"].append(ref_tokens / seconds)
            if batch is not None:
                seconds, batch_tokens = best_time(batch, lines, 3)
                rows[name]["batch"].append(batch_tokens / seconds)
            print(f"round {r + 1} {name}: anymoe {ours / 1e6:.2f} M tokens/s, reference "
                  f"{rows[name]['ref'][-1] / 1e6:.2f} M tokens/s ({our_tokens} tokens)", flush=True)

    def span(values):
        return f"{statistics.median(values) / 1e6:.2f} ({min(values) / 1e6:.2f}-{max(values) / 1e6:.2f})"

    print(f"\n{len(text.encode())} bytes of mixed text{' (the corpus once)' if args.once else ''}, {args.rounds} interleaved rounds, one thread; "
          "M tokens/s, median (min-max)")
    print("| case | anymoe | reference (whole text) | ratio | reference encode_batch |")
    print("| --- | --- | --- | --- | --- |")
    for name, row in rows.items():
        ratios = [a / b for a, b in zip(row["anymoe"], row["ref"])]
        ref = ("tiktoken " + tiktoken.__version__) if name == "kimi-k2" else "tokenizers"
        batch = span(row["batch"]) if row["batch"] else "-"
        print(f"| {name} | {span(row['anymoe'])} | {ref} {span(row['ref'])} | "
              f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) | {batch} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
