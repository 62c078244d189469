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

The decoder layer itself is transformers' GlmMoeDsaDecoderLayer (the same code that runs
the trunk's layers), built for index 4 and loaded with the NextN layer's weights; the
trunk's hidden states come from transformers' model with a hook on the final norm.

Weights: tests/golden/fp8/glm_moe_dsa (the tiny GLM-5 with its MTP layer, FP8 blocks),
dequantised by tools/gen_fp8_golden.py's block formula, as that golden's logits are.
Output: tests/golden/mtp/fp8_glm_moe_dsa_mtp_logits.npy, f32 [T - 1, vocab] for the
prompt of tests/golden/fp8/glm_moe_dsa/golden.json: row i predicts t_{i+2} from h_i and
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

SRC = gc.GOLDEN_DIR / "fp8" / "glm_moe_dsa"
OUT = gc.GOLDEN_DIR / "mtp" / "fp8_glm_moe_dsa_mtp_logits.npy"


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    x32 = x.float()
    return x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * w


def dequantised_state() -> dict:
    stored = load_file(str(SRC / "model.safetensors"))
    out = {}
    for key, t in stored.items():
        if key.endswith("_scale_inv"):
            continue
        scale = stored.get(key + "_scale_inv")
        out[key] = dequantise(t, scale) if scale is not None else t.float()
    return out


def main() -> None:
    torch.set_num_threads(1)
    golden = json.loads((SRC / "golden.json").read_text())
    ids = golden["prompt_ids"]
    n = golden["mtp_layer"]
    w = dequantised_state()

    model = load_reference(gc.GOLDEN_DIR / "moe" / "glm_moe_dsa")  # config + architecture
    sd = model.state_dict()
    with torch.no_grad():
        for key, value in w.items():
            if not key.startswith(f"model.layers.{n}.") and key in sd:
                sd[key].copy_(value)
        fuse_experts(model, {k: v for k, v in w.items() if not k.startswith(f"model.layers.{n}.")})

    captured = {}

    def keep_input(module, inputs, output) -> None:  # returns None: the output stands
        captured["h"] = inputs[0]

    model.model.norm.register_forward_hook(keep_input)
    with torch.no_grad():
        trunk_logits = model(torch.tensor([ids]), use_cache=False).logits[0].float()
    golden_logits = np.load(SRC / "logits.npy")
    err = np.abs(trunk_logits.numpy() - golden_logits).max()
    assert err < 1e-4, f"trunk differs from the fp8 golden by {err}"
    h = captured["h"][0]  # [T, H], before the final norm

    # The NextN layer as a decoder layer of index n: MoE, with its own (full) indexer.
    cfg = copy.deepcopy(model.config)
    cfg.mlp_layer_types = list(cfg.mlp_layer_types) + ["sparse"]
    cfg.indexer_types = list(cfg.indexer_types) + ["full"]
    cfg.layer_types = list(cfg.layer_types) + ["indexed_attention"]
    from transformers.models.glm_moe_dsa.modeling_glm_moe_dsa import GlmMoeDsaDecoderLayer
    from transformers.masking_utils import create_causal_mask

    layer = GlmMoeDsaDecoderLayer(cfg, n).float().eval()
    prefix = f"model.layers.{n}."
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
        assert e == cfg.n_routed_experts, e
    mtp_only = {"enorm.weight", "hnorm.weight", "eh_proj.weight", "shared_head.norm.weight"}
    left = {k for k in w if k.startswith(prefix)} - used - {prefix + k for k in mtp_only}
    assert not left, f"NextN tensors not used: {sorted(left)}"

    eps = cfg.rms_norm_eps
    with torch.no_grad():
        nxt = torch.tensor(ids[1:])
        e_i = rms_norm(model.model.embed_tokens(nxt), w[prefix + "enorm.weight"], eps)
        g_i = rms_norm(h[:-1], w[prefix + "hnorm.weight"], eps)
        z = torch.cat([e_i, g_i], dim=-1) @ w[prefix + "eh_proj.weight"].T
        z = z.unsqueeze(0)
        pos = torch.arange(z.shape[1]).unsqueeze(0)
        mask = create_causal_mask(config=cfg, inputs_embeds=z, attention_mask=None, cache=None,
                                  position_ids=pos, allow_is_causal_skip=False)
        pe = model.model.rotary_emb(z, position_ids=pos)
        z, _ = layer(z, attention_mask=mask, position_ids=pos, position_embeddings=pe)
        logits = model.lm_head(rms_norm(z[0], w[prefix + "shared_head.norm.weight"], eps))
    np.save(OUT, logits.float().numpy().astype(np.float32))
    print(f"{OUT}: {tuple(logits.shape)}, trunk vs golden {err:.2e}, "
          f"argmax {logits.argmax(-1)[:8].tolist()}")


if __name__ == "__main__":
    main()
