#!/usr/bin/env python3
"""Golden numbers for the quality meter (src/runtime/perplexity.*), from transformers.

tests/golden/perplexity/golden.json: token ids (seeded, 80 = 2.5 chunks of 32), and for
context 32 (so 2 chunks, each scoring positions 16..30 against the next token):
  - perplexity of tests/golden/llama_tiny: exp(mean NLL) over the 30 scored tokens and
    llama-perplexity's error (PPL * sqrt(var(NLL) / (n - 1)));
  - the KL divergence of llama_tiny_tied from llama_tiny (the base) on the same tokens,
    KL(p_base || p) per token in float64: mean, and the share of tokens whose argmax agrees.
Logits: transformers 5.24 (f32, eager), one forward per chunk from an empty cache.

Run (repo root): tools/.venv/bin/python tools/gen_perplexity_golden.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import golden_common as gc  # noqa: E402

CTX, N_TOKENS, SEED = 32, 80, 4242


def chunk_logits(folder: Path, ids: list[int]) -> list[np.ndarray]:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    out = []
    with torch.no_grad():
        for c in range(len(ids) // CTX):
            chunk = ids[c * CTX:(c + 1) * CTX]
            out.append(model(torch.tensor([chunk])).logits[0].double().numpy())
    return out


def main() -> None:
    torch.set_num_threads(1)
    ids = [int(i) for i in np.random.default_rng(SEED).integers(3, 512, size=N_TOKENS)]
    base = chunk_logits(gc.GOLDEN_DIR / "llama_tiny", ids)
    other = chunk_logits(gc.GOLDEN_DIR / "llama_tiny_tied", ids)
    first = CTX // 2
    nll, kld, same = [], [], []
    for c, (lb, lo) in enumerate(zip(base, other)):
        for p in range(first, CTX - 1):
            nxt = ids[c * CTX + p + 1]
            lp_b = lb[p] - np.logaddexp.reduce(lb[p])
            lp_o = lo[p] - np.logaddexp.reduce(lo[p])
            nll.append(-lp_b[nxt])
            kld.append(float(np.sum(np.exp(lp_b) * (lp_b - lp_o))))
            same.append(int(np.argmax(lb[p]) == np.argmax(lo[p])))
    nll = np.array(nll)
    ppl = float(np.exp(nll.mean()))
    err = ppl * float(np.sqrt((np.mean(nll ** 2) - nll.mean() ** 2) / (len(nll) - 1)))
    out = gc.GOLDEN_DIR / "perplexity"
    out.mkdir(parents=True, exist_ok=True)
    (out / "golden.json").write_text(json.dumps({
        "ids": ids, "context": CTX, "scored": len(nll), "ppl": ppl, "ppl_error": err,
        "kld_mean": float(np.mean(kld)), "kld_max": float(np.max(kld)),
        "same_top": float(np.mean(same)), "base": "llama_tiny", "other": "llama_tiny_tied",
        "versions": gc.versions()}, indent=1) + "\n")
    print(f"ppl {ppl:.6f} +/- {err:.6f}, kld {np.mean(kld):.6f}, same top {np.mean(same):.3f}")


if __name__ == "__main__":
    main()
