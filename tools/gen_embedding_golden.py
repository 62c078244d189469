#!/usr/bin/env python3
"""Embedding goldens for POST /v1/embeddings, from Hugging Face transformers.

For tests/golden/llama_tiny and tests/golden/moe/glm_moe_dsa (a dense llama and
the GLM-5 MoE with MLA + DSA): the base model's last_hidden_state (after the
final norm) of each input, mean-pooled over every position, in float64, with
the ids the HF tokenizer gives each text (tokenizer(text), special tokens
added as a document encodes). Writes <model>/embeddings.json:
  {"cases": [{"text": str|null, "ids": [...], "mean": [...]}], "versions": {...}}

The reference model is float32 with eager attention; the engine is compared
within the tolerance the test states.

Usage (repo root): tools/.venv/bin/python tools/gen_embedding_golden.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
import golden_common as gc  # noqa: E402

MODELS = ["llama_tiny", "moe/glm_moe_dsa"]
TEXTS = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "x",
    # Longer than one prefill chunk of the test's scheduler (16 tokens).
    "It was the best of times, it was the worst of times, it was the age of wisdom, "
    "it was the age of foolishness, it was the epoch of belief.",
]
ID_CASES = [[7], [1, 2, 3, 4, 5, 6, 7, 8], list(range(100, 160))]


def main() -> None:
    for name in MODELS:
        folder = gc.GOLDEN_DIR / name
        tok = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(
            folder, dtype=torch.float32, attn_implementation="eager"
        ).eval()
        cases = []
        inputs = [(t, tok(t)["input_ids"]) for t in TEXTS] + [(None, ids) for ids in ID_CASES]
        for text, ids in inputs:
            with torch.no_grad():
                out = model.model(input_ids=torch.tensor([ids]))
            hidden = out.last_hidden_state[0].to(torch.float64)  # [T, hidden], after the norm
            cases.append({"text": text, "ids": list(ids), "mean": hidden.mean(dim=0).tolist()})
        gc.write_json(folder / "embeddings.json", {"cases": cases, "versions": gc.versions()})
        print(f"{name}: {len(cases)} cases, hidden {len(cases[0]['mean'])}")


if __name__ == "__main__":
    main()
