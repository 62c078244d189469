#!/usr/bin/env python3
"""Expert-profile goldens from Hugging Face transformers (tests/golden/expert_profile/).

For each tiny MoE checkpoint of tests/golden/moe/ named below, runs the golden prompt
(golden.json prompt_ids, one forward pass, float32) through transformers and taps each
sparse MoE block: the router's logits (its `gate` module's output) and, from the
`experts` module's own inputs (hidden states, chosen experts, combining weights), every
chosen expert's output recomputed from that module's weights. Writes per MoE layer and
expert what `anymoe profile` measures (runtime/expert_profile.h):
  tokens_routed     (token, expert) selections
  probability_mass  sum over tokens of softmax(logits) (softmax routers) or
                    sigmoid(logits) / sum(sigmoid(logits)) (sigmoid routers)
  saliency          mean over the tokens routed of weight * ||expert output||_2 (REAP)

Usage (repo root): /work/venv-hf/bin/python tools/gen_expert_profile_golden.py
(torch + transformers; the versions are recorded in each file).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import transformers
from transformers import AutoModelForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parent))
import golden_common as gc  # noqa: E402

MODELS = {"qwen3_moe": "softmax", "glm4_moe": "sigmoid", "mixtral": "softmax"}
OUT = gc.GOLDEN_DIR / "expert_profile"


def profile(name: str, scoring: str) -> dict:
    folder = gc.GOLDEN_DIR / "moe" / name
    prompt = json.loads((folder / "golden.json").read_text())["prompt_ids"]
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    n_experts = model.config.num_local_experts if name == "mixtral" else (
        model.config.num_experts if name == "qwen3_moe" else model.config.n_routed_experts)
    layers = {}

    def hooks(index: int, block):
        state = {}

        def on_gate(_module, _inputs, output):
            state["logits"] = output[0].detach().reshape(-1, n_experts).double()

        def on_experts(module, inputs, _output):
            x, idx, w = inputs
            logits = state["logits"]
            probs = torch.softmax(logits, -1) if scoring == "softmax" else torch.sigmoid(logits)
            probs = probs / probs.sum(-1, keepdim=True)
            counts = [0] * n_experts
            sal = [0.0] * n_experts
            for t in range(x.shape[0]):
                for j in range(idx.shape[1]):
                    e = int(idx[t, j])
                    gate, up = torch.nn.functional.linear(x[t], module.gate_up_proj[e]).chunk(2)
                    y = torch.nn.functional.linear(module.act_fn(gate) * up, module.down_proj[e])
                    counts[e] += 1
                    sal[e] += float(w[t, j]) * float(y.double().norm())
            layers[index] = {
                "layer": index,
                "tokens_routed": counts,
                "probability_mass": probs.sum(0).tolist(),
                "saliency": [s / c if c else 0.0 for s, c in zip(sal, counts)],
            }

        block.gate.register_forward_hook(on_gate)
        block.experts.register_forward_hook(on_experts)

    for i, layer in enumerate(model.model.layers):
        block = getattr(layer, "mlp", None) or getattr(layer, "block_sparse_moe", None)
        if block is not None and hasattr(block, "experts"):
            hooks(i, block)
    with torch.no_grad():
        model(torch.tensor([prompt]))
    return {
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "generator": "tools/gen_expert_profile_golden.py",
        "model_dir": f"moe/{name}",
        "scoring": scoring,
        "prompt_ids": prompt,
        "num_experts": n_experts,
        "layers": [layers[i] for i in sorted(layers)],
    }


def main() -> None:
    torch.set_num_threads(1)
    OUT.mkdir(parents=True, exist_ok=True)
    for name, scoring in MODELS.items():
        data = profile(name, scoring)
        (OUT / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n")
        print(name, [sum(l["tokens_routed"]) for l in data["layers"]])


if __name__ == "__main__":
    main()
