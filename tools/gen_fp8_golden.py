#!/usr/bin/env python3
"""FP8 block-quantised copies of the tiny MoE checkpoints, with their references.

Real DeepSeek-V3 / GLM-5 "-FP8" checkpoints store each quantised linear as an
F8_E4M3 weight plus an f32 `<name>_scale_inv` of shape
[ceil(rows / br), ceil(cols / bc)]; element (r, c) is w[r, c] * scale_inv[r // br, c // bc].
This writes such a copy of tests/golden/moe/{deepseek_v3, glm_moe_dsa}:

  tests/golden/fp8/<name>/model.safetensors  F8_E4M3 linears + f32 _scale_inv; embeddings,
                                             norms, router, biases, lm_head as in the source
  tests/golden/fp8/<name>/config.json        + quantization_config (quant_method fp8,
                                             fmt e4m3, weight_block_size, modules_to_not_convert
                                             for glm_moe_dsa as GLM-5's; none for DeepSeek-V3,
                                             whose release has none either)
  tests/golden/fp8/<name>/logits.npy         f32 [40, vocab]: transformers on the weights
                                             dequantised by the formula above (NOT
                                             transformers' own FP8 loader: see
                                             shared/field-notes.md F, partial blocks)
  tests/golden/fp8/<name>/golden.json        prompt ids, greedy ids (16), versions, block size

Each copy also carries one random MTP (NextN) layer at index num_hidden_layers, as the
releases do (config num_nextn_predict_layers 1): a decoder layer shaped like the last
trunk layer plus eh_proj, enorm, hnorm, shared_head.norm, and for DeepSeek-V3 its own
embed_tokens and shared_head.head. transformers ignores these tensors, so the goldens are
the trunk's; tests/models/mtp_test.cc checks that anymoe binds them.

The block size is [16, 24] instead of the releases' [128, 128], so that the tiny
matrices (64 wide) have several blocks per dimension and partial blocks at the
edges, the case transformers 5.24's CPU loader gets wrong.

Run (repo root): tools/.venv/bin/python tools/gen_fp8_golden.py
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
import golden_common as gc  # noqa: E402

BLOCK = (16, 24)
SOURCES = {
    # name: (source folder, modules_to_not_convert or None, MTP layer has its own
    # embed_tokens and shared_head.head: DeepSeek-V3's does, GLM-5's shares the trunk's)
    "deepseek_v3": ("deepseek_v3", None, True),
    "glm_moe_dsa": ("glm_moe_dsa", ["embed_tokens", "lm_head", "layers.4.shared_head.norm"],
                    False),
}
NEW_TOKENS = 16
FP8_MAX = 448.0  # largest finite float8_e4m3fn


def is_quantised_linear(name: str, t: torch.Tensor) -> bool:
    """What the releases store as FP8: 2-D linear weights except embeddings, the head,
    the MoE router, and GLM-5's indexer weights_proj (kept f32 by transformers)."""
    if t.dim() != 2 or not name.endswith(".weight"):
        return False
    return not re.search(r"(embed_tokens|lm_head|mlp\.gate\.weight|weights_proj|norm)", name)


def quantise(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    rows, cols = w.shape
    br, bc = BLOCK
    gr, gcols = -(-rows // br), -(-cols // bc)
    scale = torch.zeros(gr, gcols, dtype=torch.float32)
    q = torch.empty(rows, cols, dtype=torch.float8_e4m3fn)
    for i in range(gr):
        for j in range(gcols):
            blk = w[i * br:(i + 1) * br, j * bc:(j + 1) * bc].float()
            s = float(blk.abs().max()) / FP8_MAX
            s = s if s > 0 else 1.0
            scale[i, j] = s
            q[i * br:(i + 1) * br, j * bc:(j + 1) * bc] = (blk / s).to(torch.float8_e4m3fn)
    return q, scale


def dequantise(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The block formula: w[r, c] = float(q[r, c]) * scale_inv[r // br, c // bc] in f32."""
    br, bc = BLOCK
    rows, cols = q.shape
    expand = scale.repeat_interleave(br, 0)[:rows].repeat_interleave(bc, 1)[:, :cols]
    return q.to(torch.float32) * expand


def add_mtp_layer(state: dict, n_layers: int, own_embed_head: bool) -> dict:
    """Layer `n_layers`: the last trunk layer's tensor names and shapes with random values,
    plus the NextN tensors."""
    g = torch.Generator().manual_seed(31337)
    last, mtp = f"model.layers.{n_layers - 1}.", f"model.layers.{n_layers}."
    hidden = state["model.norm.weight"].shape[0]
    extra = {}
    for key, t in state.items():
        if key.startswith(last):
            noise = torch.randn(t.shape, generator=g) * 0.15
            extra[mtp + key[len(last):]] = 1 + 0.1 * noise if "norm.weight" in key else noise
    extra[mtp + "eh_proj.weight"] = torch.randn(hidden, 2 * hidden, generator=g) * 0.15
    for norm in ("enorm", "hnorm", "shared_head.norm"):
        extra[mtp + norm + ".weight"] = 1 + 0.1 * torch.randn(hidden, generator=g)
    if own_embed_head:
        vocab = state["model.embed_tokens.weight"].shape[0]
        extra[mtp + "embed_tokens.weight"] = torch.randn(vocab, hidden, generator=g) * 0.15
        extra[mtp + "shared_head.head.weight"] = torch.randn(vocab, hidden, generator=g) * 0.15
    return extra


def write(name: str, src_name: str, not_convert: list[str] | None, own_embed_head: bool,
          ids: list[int]) -> dict:
    from gen_moe_golden import load_reference  # noqa: E402 (same reference settings)

    src = gc.GOLDEN_DIR / "moe" / src_name
    out = gc.GOLDEN_DIR / "fp8" / name
    out.mkdir(parents=True, exist_ok=True)
    state = load_file(str(src / "model.safetensors"))
    config = json.loads((src / "config.json").read_text())
    n_layers = config["num_hidden_layers"]
    state.update(add_mtp_layer(state, n_layers, own_embed_head))
    stored, dequantised, n_fp8 = {}, {}, 0
    for key, t in state.items():
        # The releases keep eh_proj (and the MTP layer's own embedding / head) unquantised.
        if is_quantised_linear(key, t) and "eh_proj" not in key and "shared_head" not in key:
            q, s = quantise(t)
            stored[key] = q
            stored[key + "_scale_inv"] = s
            dequantised[key] = dequantise(q, s)
            n_fp8 += 1
        else:
            stored[key] = t
            dequantised[key] = t.float()
    save_file(stored, str(out / "model.safetensors"), metadata={"format": "pt"})
    config["num_nextn_predict_layers"] = 1
    config["quantization_config"] = {
        "quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
        "weight_block_size": list(BLOCK),
        **({"modules_to_not_convert": not_convert} if not_convert else {}),
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    for f in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copy(src / f, out / f)

    # Reference: the f32 model with every quantised weight replaced by its dequantised value.
    model = load_reference(src)
    sd = model.state_dict()
    with torch.no_grad():
        for key, value in dequantised.items():
            if key.startswith(f"model.layers.{n_layers}."):
                continue  # the MTP layer: not part of the transformers model
            target = key
            if target not in sd:  # transformers v5 fuses experts in memory
                continue
            sd[target].copy_(value)
        fuse_experts(model, dequantised)
        logits = model(torch.tensor([ids]), use_cache=False).logits[0].float()
        gen = model.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False,
                             eos_token_id=None, pad_token_id=0)
    greedy = gen[0, len(ids):].tolist()
    np.save(out / "logits.npy", logits.numpy().astype(np.float32))
    golden = {
        "source": f"tests/golden/moe/{src_name}", "prompt_ids": ids, "greedy_ids": greedy,
        "weight_block_size": list(BLOCK), "fp8_tensors": n_fp8,
        "modules_to_not_convert": not_convert, "mtp_layer": n_layers,
        "mtp_own_embed_head": own_embed_head, "versions": gc.versions(),
        "reference": "transformers (eager, f32) on the block formula's dequantised weights",
    }
    (out / "golden.json").write_text(json.dumps(golden, indent=1) + "\n")
    return golden


def fuse_experts(model, dequantised: dict) -> None:
    """Copies per-expert weights into transformers v5's fused expert parameters."""
    for name, module in model.named_modules():
        if not hasattr(module, "gate_up_proj") or not name.endswith("mlp.experts"):
            continue
        e = 0
        while f"{name}.{e}.gate_proj.weight" in dequantised:
            g = dequantised[f"{name}.{e}.gate_proj.weight"]
            u = dequantised[f"{name}.{e}.up_proj.weight"]
            module.gate_up_proj[e].copy_(torch.cat([g, u], dim=0))
            module.down_proj[e].copy_(dequantised[f"{name}.{e}.down_proj.weight"])
            e += 1


def main() -> None:
    torch.set_num_threads(1)
    for name, (src_name, not_convert, own) in SOURCES.items():
        ids = json.loads((gc.GOLDEN_DIR / "moe" / src_name / "golden.json").read_text())["prompt_ids"]
        g = write(name, src_name, not_convert, own, ids)
        print(f"{name}: {g['fp8_tensors']} FP8 tensors, greedy {g['greedy_ids']}")
    (gc.GOLDEN_DIR / "fp8" / "README.md").write_text(
        "FP8 block-quantised copies of tests/golden/moe/{deepseek_v3, glm_moe_dsa}; generated by\n"
        "tools/gen_fp8_golden.py (see its docstring); do not edit by hand.\n")


if __name__ == "__main__":
    main()
