#!/usr/bin/env python3
"""Token-by-token comparison of two tools' quantisation error, from log-probability files.

Each tool's quality figure for a weight type is a mean over the scored tokens of one
text (KL divergence from its f16 base run, share of tokens whose top token is the
base's). Two tools doing the same integer arithmetic in a different order land either
side of each other by a few tokens; whether one is *worse* is a question about the
per-token differences, which neither tool prints. This reads four files in
llama-perplexity's `--kl-divergence-base` layout (anymoe's `perplexity` writes the
same): each tool's f16 base run and its run of the quantised file, over the same
tokens, and reports the paired differences with their standard errors.

File layout (both tools): "_logits_", u32 context, i32 vocab, i32 chunks, i32
tokens[chunks * context], then per chunk (context - 1 - context / 2) rows of
2 * ((vocab + 1) / 2) + 4 uint16: f32 step, f32 lowest log-prob, then one uint16 per
vocabulary entry, log-prob = lowest + step * q (entries at q = 0 lie at or below the
lowest kept value, 16 nats below the top one).

The run side is read from the same 16-bit rows, so the absolute KLD differs from the
tools' own (which use the run's f32 logits) by the rounding of those rows (steps of
16 / 65535 nats); both tools' runs are rounded the same way, so the pairing is fair.
tools/quality_table.py --paired holds both recomputed means and same-top counts
against the figures each tool printed, and stops where they disagree.

  python3 tools/kld_pairs.py A_BASE A_RUN B_BASE B_RUN   # A, B: two tools (or builds)
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

RANGE = 16.0  # nats below the top one that a row keeps


class LogProbFile:
    def __init__(self, path: Path):
        raw = np.memmap(path, dtype=np.uint8, mode="r")
        if bytes(raw[:8]) != b"_logits_":
            raise SystemExit(f"{path}: not a log-probability file")
        ctx, vocab, chunks = np.frombuffer(raw[8:20], dtype=np.int32)
        self.ctx, self.vocab, self.chunks = int(ctx), int(vocab), int(chunks)
        tokens_end = 20 + 4 * self.ctx * self.chunks
        self.tokens = np.frombuffer(raw[20:tokens_end], dtype=np.int32)
        self.words = 2 * ((self.vocab + 1) // 2) + 4
        self.rows = self.chunks * (self.ctx - 1 - self.ctx // 2)
        body = raw[tokens_end:]
        if body.size != self.rows * self.words * 2:
            raise SystemExit(f"{path}: {body.size} bytes of rows, expected "
                             f"{self.rows * self.words * 2}")
        self.body = body.view(np.uint16).reshape(self.rows, self.words)

    def log_probs(self, r0: int, r1: int) -> np.ndarray:
        rows = self.body[r0:r1]
        head = np.ascontiguousarray(rows[:, :4]).view(np.float32)  # step, lowest
        q = rows[:, 4:4 + self.vocab].astype(np.float32)
        return head[:, 1:2] + head[:, 0:1] * q


def per_token(base: LogProbFile, run: LogProbFile, batch: int = 64):
    """KL(base || run) and whether the top tokens agree, for every stored row."""
    kld = np.empty(base.rows)
    same = np.empty(base.rows, dtype=bool)
    for r0 in range(0, base.rows, batch):
        r1 = min(r0 + batch, base.rows)
        lp_b, lp_r = base.log_probs(r0, r1), run.log_probs(r0, r1)
        p_b = np.where(lp_b > -RANGE, np.exp(lp_b), 0.0)
        kld[r0:r1] = (p_b * (lp_b - lp_r)).sum(axis=1, dtype=np.float64)
        same[r0:r1] = lp_b.argmax(axis=1) == lp_r.argmax(axis=1)
    return kld, same


def compare(a_base: Path, a_run: Path, b_base: Path, b_run: Path) -> dict:
    files = [LogProbFile(p) for p in (a_base, a_run, b_base, b_run)]
    shape = {(f.ctx, f.vocab, f.chunks) for f in files}
    if len(shape) != 1 or any(not np.array_equal(f.tokens, files[0].tokens) for f in files):
        raise SystemExit("the four files must score the same tokens (context, vocab, chunks)")
    kld_a, same_a = per_token(files[0], files[1])
    kld_b, same_b = per_token(files[2], files[3])
    n = kld_a.size
    d = kld_a - kld_b
    only_a = int(np.sum(same_a & ~same_b))  # tokens where only A keeps the base's top token
    only_b = int(np.sum(same_b & ~same_a))
    return {
        "tokens": n,
        "kld_a": float(kld_a.mean()), "kld_b": float(kld_b.mean()),
        # Paired: the error of the mean difference, not of either mean.
        "kld_diff": float(d.mean()), "kld_diff_se": float(d.std(ddof=1) / math.sqrt(n)),
        "same_top_a": int(same_a.sum()), "same_top_b": int(same_b.sum()),
        "same_top_only_a": only_a, "same_top_only_b": only_b,
        # McNemar: under "no difference" only_a - only_b has sd sqrt(only_a + only_b).
        "same_top_diff_se": math.sqrt(only_a + only_b),
    }


def main() -> None:
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    print(json.dumps(compare(*map(Path, sys.argv[1:])), indent=1))


if __name__ == "__main__":
    main()
