#!/usr/bin/env python3
"""Perplexity of a GGUF model in transformers on the token windows of an anymoe (or
llama-perplexity) KL-divergence base file, for the `--exact` check of docs/quality.md.

The base file holds the run's context, chunk count and token ids; this loads the GGUF
with transformers (de-quantised to float32 on load), runs each chunk from an empty cache
(first token replaced by BOS when --bos is given) and scores the second half as
llama-perplexity does: PPL = exp(mean NLL of tokens c/2+1 .. c-1 of each chunk).

Run: tools/.venv/bin/python tools/perplexity_reference.py MODEL.gguf BASE.kld [--bos ID]
"""

from __future__ import annotations

import argparse
import struct
from pathlib import Path

import numpy as np
import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf", type=Path)
    ap.add_argument("base", type=Path)
    ap.add_argument("--bos", type=int, default=-1)
    args = ap.parse_args()
    from transformers import AutoModelForCausalLM

    raw = args.base.read_bytes()
    assert raw[:8] == b"_logits_", "not a base file"
    ctx, vocab, chunks = struct.unpack_from("<Iii", raw, 8)
    ids = np.frombuffer(raw, dtype="<i4", count=ctx * chunks, offset=20)
    torch.set_num_threads(2)
    model = AutoModelForCausalLM.from_pretrained(str(args.gguf.parent), gguf_file=args.gguf.name,
                                                 dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    nll = []
    first = ctx // 2
    with torch.no_grad():
        for c in range(chunks):
            chunk = ids[c * ctx:(c + 1) * ctx].astype(np.int64).copy()
            if args.bos >= 0:
                chunk[0] = args.bos
            logits = model(torch.from_numpy(chunk)[None]).logits[0].double()
            logp = torch.log_softmax(logits, dim=-1)
            for p in range(first, ctx - 1):
                nll.append(-float(logp[p, int(ids[c * ctx + p + 1])]))
    nll = np.array(nll)
    ppl = float(np.exp(nll.mean()))
    err = ppl * float(np.sqrt((np.mean(nll ** 2) - nll.mean() ** 2) / (len(nll) - 1)))
    print(f"transformers: {chunks} chunks x {ctx}, {len(nll)} scored, PPL = {ppl:.4f} +/- {err:.5f}")


if __name__ == "__main__":
    main()
