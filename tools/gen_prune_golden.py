#!/usr/bin/env python3
"""Expert-pruning goldens from Hugging Face transformers (tests/golden/prune/).

For tiny MoE checkpoints of tests/golden/moe/, picks the experts each MoE layer keeps
from the transformers expert profile of the golden prompt (tests/golden/expert_profile/,
tools/gen_expert_profile_golden.py) by the rule docs/expert-profiles.md gives for
--expert-prune PROFILE:KEEP: per layer (per group under group-limited routing) the KEEP
experts ranking first by saliency or tokens routed, ties by probability mass, then the
lower id. Then runs the golden prompt (one forward pass, float32) through the unmodified
transformers model with the pruned experts masked out of its router: their router logits
set to -inf (softmax routers: probability 0, the softmax taken over the kept experts), and
for sigmoid routers their selection bias (e_score_correction_bias) set to -inf too, so that
a pruned expert's selection score is -inf, as if it were absent. Writes per case:
  NAME.json         kept experts per layer, ranking, keep, chosen experts per token
  NAME_logits.npy   float32 [40, V]  prompt logits, all positions

Usage (repo root): /work/venv-hf/bin/python tools/gen_prune_golden.py
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import transformers
from transformers import AutoModelForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parent))
import golden_common as gc  # noqa: E402

# case name -> (model folder, experts kept per layer, ranking)
CASES = {
    "qwen3_moe_keep4_saliency": ("qwen3_moe", 4, "saliency"),
    "glm4_moe_keep4_saliency": ("glm4_moe", 4, "saliency"),
    "mixtral_keep4_saliency": ("mixtral", 4, "saliency"),
    "mixtral_keep2_count": ("mixtral", 2, "count"),
}
OUT = gc.GOLDEN_DIR / "prune"


def kept_experts(profile: dict, keep: int, ranking: str, n_group: int) -> dict[int, list[int]]:
    key_name = "saliency" if ranking == "saliency" else "tokens_routed"
    e = profile["num_experts"]
    per_group = e // n_group
    kept = {}
    for layer in profile["layers"]:
        order = sorted(range(e), key=lambda x: (-layer[key_name][x], -layer["probability_mass"][x], x))
        taken = [0] * n_group
        chosen = []
        for x in order:
            g = x // per_group
            if taken[g] < keep // n_group:
                taken[g] += 1
                chosen.append(x)
        kept[layer["layer"]] = sorted(chosen)
    return kept


@contextlib.contextmanager
def masked_routers(routers: dict):
    """F.linear on a router's weight returns its pruned experts' columns at -inf."""
    real = F.linear

    def linear(x, weight, bias=None):
        y = real(x, weight, bias)
        for router, pruned in routers.values():
            if weight is router.weight or (weight.data_ptr() == router.weight.data_ptr()):
                y = y.clone()
                y[..., pruned] = float("-inf")
        return y

    torch.nn.functional.linear = linear
    try:
        yield
    finally:
        torch.nn.functional.linear = real


def run(case: str, folder_name: str, keep: int, ranking: str) -> dict:
    folder = gc.GOLDEN_DIR / "moe" / folder_name
    prompt = json.loads((folder / "golden.json").read_text())["prompt_ids"]
    profile = json.loads((gc.GOLDEN_DIR / "expert_profile" / f"{folder_name}.json").read_text())
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    n_group = int(getattr(model.config, "n_group", 1) or 1)
    kept = kept_experts(profile, keep, ranking, n_group)
    e = profile["num_experts"]
    routers, chosen = {}, {}
    for i, layer in enumerate(model.model.layers):
        block = getattr(layer, "mlp", None) or getattr(layer, "block_sparse_moe", None)
        if block is None or not hasattr(block, "experts"):
            continue
        pruned = [x for x in range(e) if x not in kept[i]]
        routers[i] = (block.gate, pruned)
        bias = getattr(block.gate, "e_score_correction_bias", None)
        if bias is not None:  # sigmoid routers: selection score -inf, never chosen
            bias.data[pruned] = float("-inf")

        def on_gate(_module, _inputs, output, i=i):
            idx = output[2] if isinstance(output, tuple) and len(output) == 3 else output[-1]
            chosen[i] = [sorted(int(v) for v in row) for row in idx.reshape(len(prompt), -1)]

        block.gate.register_forward_hook(on_gate)
    with torch.no_grad(), masked_routers(routers):
        logits = model(torch.tensor([prompt])).logits[0]
    for i, rows in chosen.items():
        assert all(x in kept[i] for row in rows for x in row), f"{case}: layer {i} chose a pruned expert"
    shape = gc.save_npy_f32(OUT / f"{case}_logits.npy", logits)
    return {
        "versions": gc.versions(),
        "generator": "tools/gen_prune_golden.py",
        "model_dir": f"moe/{folder_name}",
        "profile": f"expert_profile/{folder_name}.json",
        "keep": keep,
        "ranking": ranking,
        "num_experts": e,
        "prompt_ids": prompt,
        "kept": {str(k): v for k, v in sorted(kept.items())},
        "chosen": {str(k): v for k, v in sorted(chosen.items())},
        "logits_shape": shape,
    }


def main() -> None:
    torch.set_num_threads(1)
    OUT.mkdir(parents=True, exist_ok=True)
    for case, (folder, keep, ranking) in CASES.items():
        data = run(case, folder, keep, ranking)
        gc.write_json(OUT / f"{case}.json", data)
        print(case, data["kept"])


if __name__ == "__main__":
    main()
