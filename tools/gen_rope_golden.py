#!/usr/bin/env python3
"""Generates tests/golden/rope/rope.json: RoPE inverse frequencies, attention scaling and cos/sin
exactly as Hugging Face transformers computes them.

* `configs`: for head_dim {16, 64} x rope_theta {10000, 500000} and each RoPE variant, the
  `inv_freq` and `attention_scaling` returned by
  `transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS[rope_type](config, device=None, seq_len=...)`
  (for "default": `LlamaRotaryEmbedding.compute_default_rope_parameters(config)`), plus the
  standardized `config.rope_parameters` dict, head_dim and max_position_embeddings used.
  transformers computes inv_freq in float32; values are those float32 numbers widened exactly to
  float64. attention_scaling is a Python float (float64).
* `cos_sin`: cos/sin for positions [0, 1, 7, 100] from `LlamaRotaryEmbedding.forward` (float32 math,
  `cat(freqs, freqs)` layout, already multiplied by attention_scaling), shape [4, head_dim].

"dynamic" (dynamic NTK) depends on the sequence length: `configs` entries state `seq_len` (null means
the init-time call, i.e. seq_len = max_position_embeddings). In the module (`cos_sin`), the
`dynamic_rope_update` decorator recomputes inv_freq with seq_len = max(position_ids) + 1 passed as
an int64 *tensor* (NTK base then computed with tensor ops; bit-identical here to the int path, see
the *_seq101 entries); `inv_freq_used` records the buffer the module actually used.

Usage (repo root): tools/.venv/bin/python tools/gen_rope_golden.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import golden_common as gc  # noqa: E402

POSITIONS = [0, 1, 7, 100]
HEAD_DIMS = [16, 64]
THETAS = [10000.0, 500000.0]
NUM_HEADS = 4


def variants() -> list[dict]:
    """(name, max_position_embeddings, rope_parameters without rope_theta, seq_lens)."""
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
            "beta_fast": 32.0, "beta_slow": 1.0}
    llama3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
    return [
        dict(name="default", mpe=2048, rp={"rope_type": "default"}),
        dict(name="linear_f4", mpe=2048, rp={"rope_type": "linear", "factor": 4.0}),
        dict(name="llama3_f8_orig8192", mpe=131072,
             rp={**llama3, "original_max_position_embeddings": 8192}),
        dict(name="llama3_f8_orig64", mpe=512,
             rp={**llama3, "original_max_position_embeddings": 64}),
        dict(name="yarn_f4_orig64", mpe=256, rp=dict(yarn)),
        dict(name="yarn_f4_orig64_mscale1_mscaleall1", mpe=256,
             rp={**yarn, "mscale": 1.0, "mscale_all_dim": 1.0}),
        dict(name="yarn_f4_orig64_mscale1_mscaleall0.5", mpe=256,
             rp={**yarn, "mscale": 1.0, "mscale_all_dim": 0.5}),
        # mscale without mscale_all_dim is ignored by transformers (falls back to 0.1*ln(factor)+1)
        dict(name="yarn_f4_orig64_mscale_only", mpe=256, rp={**yarn, "mscale": 0.707}),
        dict(name="yarn_f4_orig64_attnfactor0.8", mpe=256, rp={**yarn, "attention_factor": 0.8}),
        dict(name="yarn_f4_orig64_notruncate", mpe=256, rp={**yarn, "truncate": False}),
        dict(name="dynamic_f4", mpe=64, rp={"rope_type": "dynamic", "factor": 4.0},
             seq_lens=[None, 64, 100, 101, 256]),
    ]


def make_config(head_dim: int, theta: float, mpe: int, rp: dict):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=32,
        hidden_size=head_dim * NUM_HEADS,
        intermediate_size=8,
        num_hidden_layers=1,
        num_attention_heads=NUM_HEADS,
        num_key_value_heads=NUM_HEADS,
        head_dim=head_dim,
        max_position_embeddings=mpe,
        rope_parameters={**rp, "rope_theta": theta},
    )


def init_params(config, seq_len):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    rope_type = config.rope_parameters["rope_type"]
    if rope_type == "default":
        inv_freq, scale = LlamaRotaryEmbedding.compute_default_rope_parameters(config)
    else:
        inv_freq, scale = ROPE_INIT_FUNCTIONS[rope_type](config, None, seq_len=seq_len)
    assert inv_freq.dtype == torch.float32, inv_freq.dtype
    return inv_freq, float(scale)


def module_cos_sin(config):
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    rot = LlamaRotaryEmbedding(config)
    x = torch.zeros(1, dtype=torch.float32)
    pos = torch.tensor([POSITIONS], dtype=torch.long)
    with torch.no_grad():
        cos, sin = rot(x, pos)
    return {
        "inv_freq_used": gc.tensor_to_f64_list(rot.inv_freq),
        "attention_scaling_used": float(rot.attention_scaling),
        "cos": gc.tensor_to_f64_list(cos[0]),
        "sin": gc.tensor_to_f64_list(sin[0]),
    }


def main() -> None:
    torch.set_num_threads(1)
    configs, cos_sin = [], []
    for head_dim in HEAD_DIMS:
        for theta in THETAS:
            for v in variants():
                for seq_len in v.get("seq_lens", [None]):
                    config = make_config(head_dim, theta, v["mpe"], v["rp"])
                    inv_freq, scale = init_params(config, seq_len)
                    entry = {
                        "name": f"{v['name']}_hd{head_dim}_theta{int(theta)}"
                                + (f"_seq{seq_len}" if seq_len is not None else ""),
                        "rope_type": config.rope_parameters["rope_type"],
                        "head_dim": head_dim,
                        "rotary_dim": head_dim,
                        "max_position_embeddings": v["mpe"],
                        "rope_parameters": dict(config.rope_parameters),
                        "seq_len": seq_len,
                        "inv_freq": gc.tensor_to_f64_list(inv_freq),
                        "attention_scaling": scale,
                    }
                    assert len(entry["inv_freq"]) == head_dim // 2
                    configs.append(entry)
                # cos/sin from the module: every variant at head_dim 16 / theta 1e4, plus a
                # Llama-3.1-like setup (head_dim 64, theta 5e5, llama3 orig 8192).
                if (head_dim, theta) == (16, 10000.0) or (
                    (head_dim, theta) == (64, 500000.0) and v["name"] == "llama3_f8_orig8192"
                ):
                    config = make_config(head_dim, theta, v["mpe"], v["rp"])
                    cs = {
                        "name": f"{v['name']}_hd{head_dim}_theta{int(theta)}",
                        "rope_type": config.rope_parameters["rope_type"],
                        "head_dim": head_dim,
                        "max_position_embeddings": v["mpe"],
                        "rope_parameters": dict(config.rope_parameters),
                        "positions": POSITIONS,
                        "seq_len_effective": max(POSITIONS) + 1,
                        **module_cos_sin(config),
                    }
                    cos_sin.append(cs)

    out = {
        **gc.versions(),
        "generator": "tools/gen_rope_golden.py",
        "float_note": "inv_freq/cos/sin are transformers' float32 results widened exactly to float64; "
                      "attention_scaling is a Python float64",
        "layout_note": "cos/sin rows are [head_dim] = cat(freqs, freqs) (rotate_half / NeoX layout), "
                       "already multiplied by attention_scaling",
        "dynamic_note": "dynamic: `configs` use ROPE_INIT_FUNCTIONS['dynamic'](config, seq_len=int) "
                        "(seq_len null -> max_position_embeddings; seq_len <= max_position_embeddings "
                        "-> unscaled). `cos_sin` come from LlamaRotaryEmbedding after dynamic_rope_update "
                        "with seq_len = max(positions)+1 = 101 passed as an int64 tensor "
                        "(for these configs bit-identical to the *_seq101 entries of `configs`)",
        "configs": configs,
        "cos_sin": cos_sin,
    }
    path = gc.GOLDEN_DIR / "rope" / "rope.json"
    gc.write_json(path, out)
    print(f"{path}: {len(configs)} configs, {len(cos_sin)} cos/sin sets, {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
