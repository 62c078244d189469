#!/usr/bin/env python3
"""Reference logits of the GLM-5 MTP (NextN) layer, for tests/models/mtp_test.cc.

transformers loads but never runs the NextN layer, so its step is written here in
torch from the published description (DeepSeek-V3 technical report, section 2.2,
"Multi-Token Prediction"; GLM-4.5/GLM-5 ship the same module as layer
`num_hidden_layers`), with the checkpoint's own layout (the embedding half of eh_proj's
input first, as the released weights are used by the serving engines):

    e_i   = RMSNorm_enorm(Embed(t_{i+1}))          Embed: the trunk's embedding (GLM-5 has
    g_i   = RMSNorm_hnorm(h_i)                     no own copy); h_i: the trunk's last
    z_i   = eh_proj([e_i ; g_i])                   hidden state at i, before its final norm
    z     = DecoderLayer_{num_hidden_layers}(z)    a full layer (MLA + own DSA indexer, MoE),
                                                   causal over the MTP rows, RoPE position i
    logits_i = Head(RMSNorm_shared_head.norm(z_i)) Head: the trunk's lm_head

The decoder layer itself is transformers' own (GlmMoeDsaDecoderLayer /
DeepseekV3DecoderLayer, the code that runs the trunk's layers), built for the NextN index
and loaded with its weights; the trunk's hidden states come from transformers' model
with a hook on the final norm.

Weights: tests/golden/fp8/{glm_moe_dsa, deepseek_v3} (the tiny GLM-5, whose NextN layer
shares the trunk's embedding and head, and DeepSeek-V3, whose layer has its own), FP8
blocks dequantised by tools/gen_fp8_golden.py's block formula, as those goldens' logits
are. Output: tests/golden/mtp/fp8_<name>_mtp_logits.npy, f32 [T - 1, vocab] for the
prompt of tests/golden/fp8/<name>/golden.json: row i predicts t_{i+2} from h_i and
t_{i+1}.

Run (repo root): tools/.venv/bin/python tools/gen_mtp_reference.py
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
import golden_common as gc  # noqa: E402
from gen_fp8_golden import dequantise, fuse_experts  # noqa: E402
from gen_moe_golden import load_reference  # noqa: E402

OUT_DIR = gc.GOLDEN_DIR / "mtp"
MODELS = ("glm_moe_dsa", "deepseek_v3")


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    x32 = x.float()
    return x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * w


def dequantised_state(src: Path) -> dict:
    stored = load_file(str(src / "model.safetensors"))
    out = {}
    for key, t in stored.items():
        if key.endswith("_scale_inv"):
            continue
        scale = stored.get(key + "_scale_inv")
        out[key] = dequantise(t, scale) if scale is not None else t.float()
    return out


def nextn_layer(name: str, config, n: int):
    """transformers' own decoder layer of the model, built as layer n: MoE, and on GLM-5
    with its own (full) DSA indexer."""
    cfg = copy.deepcopy(config)
    if name == "glm_moe_dsa":
        from transformers.models.glm_moe_dsa.modeling_glm_moe_dsa import GlmMoeDsaDecoderLayer

        cfg.mlp_layer_types = list(cfg.mlp_layer_types) + ["sparse"]
        cfg.indexer_types = list(cfg.indexer_types) + ["full"]
        cfg.layer_types = list(cfg.layer_types) + ["indexed_attention"]
        return cfg, GlmMoeDsaDecoderLayer(cfg, n).float().eval()
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3DecoderLayer

    assert n >= cfg.first_k_dense_replace
    return cfg, DeepseekV3DecoderLayer(cfg, n).float().eval()


def load_layer(layer, w: dict, prefix: str, n_experts: int) -> set:
    """Copies the NextN weights into `layer`; returns the names used."""
    lsd = layer.state_dict()
    used = set()
    with torch.no_grad():
        for key in lsd:
            if key in ("mlp.experts.gate_up_proj", "mlp.experts.down_proj"):
                continue
            lsd[key].copy_(w[prefix + key])
            used.add(prefix + key)
        e = 0
        while f"{prefix}mlp.experts.{e}.gate_proj.weight" in w:
            g, u, d = (w[f"{prefix}mlp.experts.{e}.{p}_proj.weight"] for p in ("gate", "up", "down"))
            layer.mlp.experts.gate_up_proj[e].copy_(torch.cat([g, u], dim=0))
            layer.mlp.experts.down_proj[e].copy_(d)
            used.update(f"{prefix}mlp.experts.{e}.{p}_proj.weight" for p in ("gate", "up", "down"))
            e += 1
        assert e == n_experts, e
    return used


def reference(name: str) -> None:
    src = gc.GOLDEN_DIR / "fp8" / name
    golden = json.loads((src / "golden.json").read_text())
    ids = golden["prompt_ids"]
    n = golden["mtp_layer"]
    w = dequantised_state(src)
    prefix = f"model.layers.{n}."

    model = load_reference(gc.GOLDEN_DIR / "moe" / name)  # config + architecture
    sd = model.state_dict()
    trunk = {k: v for k, v in w.items() if not k.startswith(prefix)}
    with torch.no_grad():
        for key, value in trunk.items():
            if key in sd:
                sd[key].copy_(value)
        fuse_experts(model, trunk)

    captured = {}

    def keep_input(module, inputs, output) -> None:  # returns None: the output stands
        captured["h"] = inputs[0]

    model.model.norm.register_forward_hook(keep_input)
    with torch.no_grad():
        trunk_logits = model(torch.tensor([ids]), use_cache=False).logits[0].float()
    err = np.abs(trunk_logits.numpy() - np.load(src / "logits.npy")).max()
    assert err < 1e-4, f"{name}: trunk differs from the fp8 golden by {err}"
    h = captured["h"][0]  # [T, H], before the final norm

    cfg, layer = nextn_layer(name, model.config, n)
    used = load_layer(layer, w, prefix, cfg.n_routed_experts)
    own = golden["mtp_own_embed_head"]
    embed = w[prefix + "embed_tokens.weight"] if own else w["model.embed_tokens.weight"]
    head = w[prefix + "shared_head.head.weight"] if own else w["lm_head.weight"]
    step = {"enorm.weight", "hnorm.weight", "eh_proj.weight", "shared_head.norm.weight"}
    if own:
        step |= {"embed_tokens.weight", "shared_head.head.weight"}
    left = {k for k in w if k.startswith(prefix)} - used - {prefix + k for k in step}
    assert not left, f"NextN tensors not used: {sorted(left)}"

    from transformers.masking_utils import create_causal_mask

    eps = cfg.rms_norm_eps
    with torch.no_grad():
        e_i = rms_norm(embed[torch.tensor(ids[1:])], w[prefix + "enorm.weight"], eps)
        g_i = rms_norm(h[:-1], w[prefix + "hnorm.weight"], eps)
        z = (torch.cat([e_i, g_i], dim=-1) @ w[prefix + "eh_proj.weight"].T).unsqueeze(0)
        pos = torch.arange(z.shape[1]).unsqueeze(0)
        mask = create_causal_mask(config=cfg, inputs_embeds=z, attention_mask=None, cache=None,
                                  position_ids=pos, allow_is_causal_skip=False)
        pe = model.model.rotary_emb(z, position_ids=pos)
        out = layer(z, attention_mask=mask, position_ids=pos, position_embeddings=pe)
        z = out[0] if isinstance(out, tuple) else out
        logits = rms_norm(z[0], w[prefix + "shared_head.norm.weight"], eps) @ head.T
    path = OUT_DIR / f"fp8_{name}_mtp_logits.npy"
    np.save(path, logits.float().numpy().astype(np.float32))
    print(f"{path}: {tuple(logits.shape)}, trunk vs golden {err:.2e}, "
          f"argmax {logits.argmax(-1)[:8].tolist()}")


def main() -> None:
    torch.set_num_threads(1)
    for name in MODELS:
        reference(name)


if __name__ == "__main__":
    main()
