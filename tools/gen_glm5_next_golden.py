#!/usr/bin/env python3
"""Generates the tiny random-weight `glm5_next` (GLM-5.3-Flash) golden with transformers.

tests/golden/moe/glm5_next/ (README.md there lists every file) holds a
`Glm5NextForConditionalGeneration` checkpoint, saved by save_pretrained in the released
(original) tensor layout, with a tiny random vision tower beside the text model, and the
goldens of its text model, computed in float32 with eager attention and eager experts (`fla`
and `causal_conv1d` are not installed, so HF's torch KDA / conv fallbacks run):

  logits.npy            [P, V]  prompt forward, no cache (KDA chunked form, C = 64, over 3 chunks)
  decode_logits.npy     [24, V] raw logits of each generate(do_sample=False) step (KDA recurrent)
  prefill16_logits.npy  [P, V]  prefill prompt[:16] with a cache, then one token at a time
  chunked_logits.npy    [P, V]  prompt in cached chunks CHUNKS (chunked form with the carried state)
  router.json / router_weights.json, dsa_topk.json (selected key slots per query, pools + tail)

The config exercises every glm5_next feature with small sizes: 5 layers = KDA, indexed (full),
indexed (shared), KDA, indexed (full); layer 0 dense, 1-4 MoE; hc_mult 4; index_kpool 4 with
index_topk 8 (2 pools), so a query past position 11 no longer sees every key; the gate/up
weights of every FFN are scaled up so that swiglu_limit clamps (fractions recorded, and the
logits without the clamp are recorded to differ). Seeds are searched so that greedy decoding,
routing and the pool top-k have no near-ties.

Usage (repo root): tools/.venv/bin/python tools/gen_glm5_next_golden.py
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import golden_common as gc  # noqa: E402

NAME = "glm5_next"
OUT_DIR = gc.GOLDEN_DIR / "moe" / NAME
VOCAB = 512
PROMPT_LEN = 150           # > 2 KDA chunks of 64
NEW_TOKENS = 24
PROMPT_SEED = 5353
CHUNKS = [50, 64, 36]      # chunked_logits.npy: a prefill split across three cached steps
INIT_STD = 0.15
NORM_JITTER = 0.1
BIAS_STD = 0.1
SWIGLU_SCALE = 4.0         # gate/up weights of every FFN, so that the clamp at 10 binds
MIN_CLAMPED = 0.005        # each FFN kind clamps at least this fraction of its gate or up values
MIN_DISTINCT = 6
MIN_MARGIN = 0.02
MIN_ROUTER_MARGIN = 1e-4
MIN_POOL_MARGIN = 1e-5
N_SEEDS = 60
SEED_BASE = 5300
MAX_BYTES = 5 * 1024 * 1024 // 2  # 150-position logits: 300 KB a file

LAYER_TYPES = ["linear_attention", "indexed_attention", "indexed_attention", "linear_attention",
               "indexed_attention"]
INDEXER_TYPES = ["full", "full", "shared", "full", "full"]  # HF: a shared layer follows a full one
MLP_TYPES = ["dense", "sparse", "sparse", "sparse", "sparse"]

TEXT_CONFIG = dict(
    vocab_size=VOCAB, hidden_size=64, intermediate_size=96, moe_intermediate_size=16,
    num_hidden_layers=5, num_attention_heads=4, num_key_value_heads=4,
    n_shared_experts=1, n_routed_experts=8, num_experts_per_tok=2, n_group=1, topk_group=1,
    norm_topk_prob=True, routed_scaling_factor=2.5,
    q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=16, qk_rope_head_dim=0, v_head_dim=16,
    index_n_heads=8, index_head_dim=16, index_topk=8, index_kpool=4,
    index_kpool_always_select_tail=True,
    linear_num_heads=2, linear_head_dim=16, linear_conv_kernel_dim=4, linear_lower_bound=-5.0,
    hc_mult=4, hc_eps=1e-6, hc_sinkhorn_iters=20, swiglu_limit=10.0, rms_norm_eps=1e-5,
    max_position_embeddings=4096, initializer_range=INIT_STD, hidden_act="silu",
    layer_types=LAYER_TYPES, indexer_types=INDEXER_TYPES, mlp_layer_types=MLP_TYPES,
    tie_word_embeddings=False, bos_token_id=0, eos_token_id=0, pad_token_id=None,
)
# The smallest vision tower the config allows; anymoe ignores it (text-only).
VISION_CONFIG = dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=2, out_hidden_size=64,
                     patch_size=2, spatial_merge_size=1, temporal_patch_size=1,
                     projection_intermediate_size=16)


def make_config():
    from transformers import Glm5NextConfig

    return Glm5NextConfig(text_config=dict(TEXT_CONFIG), vision_config=dict(VISION_CONFIG),
                          tie_word_embeddings=False)


def init_weights(model, seed: int) -> None:
    """HF init (normal(0, initializer_range)), then every parameter HF initialises to a
    constant re-randomised, and the FFN gate/up weights scaled by SWIGLU_SCALE."""
    g = torch.Generator().manual_seed(seed + 7)

    def randn(t, std, mean=0.0):
        t.copy_(mean + std * torch.randn(t.shape, generator=g, dtype=torch.float64))

    with torch.no_grad():
        for name, t in model.named_parameters():
            if not name.startswith("model.language_model.") and name != "lm_head.weight":
                continue
            if name.endswith("e_score_correction_bias"):
                randn(t, BIAS_STD)
            elif name.endswith(("norm.weight", "layernorm.weight")):
                randn(t, NORM_JITTER, 1.0)
            elif name.endswith(".bias"):
                randn(t, BIAS_STD)
            elif name.endswith("_hc.fn"):
                randn(t, 0.1)
            elif name.endswith("_hc.base"):
                randn(t, 0.5)
            elif name.endswith("_hc.scale"):
                randn(t, 0.3, 1.0)
            elif name.endswith("index_kpool_compress_ape"):
                randn(t, 0.5)
            elif name.endswith("index_kpool_compress_gate"):
                randn(t, INIT_STD)
            elif name.endswith("A_log"):
                randn(t, 0.5)
            if name.endswith(("mlp.gate_proj.weight", "mlp.up_proj.weight",
                              "shared_experts.gate_proj.weight", "shared_experts.up_proj.weight",
                              "experts.gate_up_proj")):
                t.mul_(SWIGLU_SCALE)
        for name, p in model.named_parameters():
            if name.startswith("model.visual."):
                continue  # never read by the text model
            if p.numel() > 1 and (torch.all(p == p.flatten()[0])):
                raise RuntimeError(f"parameter {name} is still trivially initialised")
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                randn(b, BIAS_STD)


def build_and_save(seed: int, out_dir: Path) -> None:
    from transformers import Glm5NextForConditionalGeneration

    torch.manual_seed(seed)
    model = Glm5NextForConditionalGeneration(make_config()).float()
    init_weights(model, seed)
    model.save_pretrained(str(out_dir))  # the released layout (save_original_format=True)


def load_reference(model_dir: Path):
    from transformers import Glm5NextForConditionalGeneration

    model, info = Glm5NextForConditionalGeneration.from_pretrained(
        str(model_dir), dtype=torch.float32, attn_implementation="eager",
        experts_implementation="eager", output_loading_info=True)
    bad = {k: sorted(v) for k, v in info.items() if k != "error_msgs" and v}
    assert not bad, bad  # the saved file maps back onto every parameter
    model.eval()
    assert model.dtype == torch.float32
    assert model.config.text_config._attn_implementation == "eager"
    return model


def prompt_ids() -> list[int]:
    rng = np.random.default_rng(PROMPT_SEED)
    return [int(i) for i in rng.integers(len(gc.SPECIAL_TOKENS), VOCAB, size=PROMPT_LEN)]


# --------------------------------------------------------------------------------------------
# Recording: routers, pool top-k (with its margins), SwiGLU clamping


def text_layers(model):
    return model.model.language_model.layers


class Recorder:
    def __init__(self, model):
        from transformers.models.glm5_next import modeling_glm5_next as mg

        self.mg = mg
        self.model = model
        self.handles = []
        self.reset()
        for li, layer in enumerate(text_layers(model)):
            mlp = layer.mlp
            if isinstance(mlp, mg.Glm5NextTextMoE):
                self.handles.append(mlp.gate.register_forward_hook(self._router_hook(li)))
            attn = layer.self_attn
            if isinstance(attn, mg.Glm5NextTextAttention) and attn.indexer is not None:
                ix = attn.indexer
                self.handles.append(ix.wq_b.register_forward_hook(self._stash(li, "q")))
                self.handles.append(ix.weights_proj.register_forward_hook(self._stash(li, "w")))
                self.handles.append(ix.register_forward_hook(self._indexer_hook(li), with_kwargs=True))

    def reset(self):
        self.router, self.router_margin = {}, {}
        self.dsa, self.pool_margin = {}, {}
        self.stash = {}

    def remove(self):
        for h in self.handles:
            h.remove()

    def _router_hook(self, li):
        def hook(mod, args, out):
            _, weights, idx = out
            x = args[0].reshape(-1, mod.hidden_dim).float()
            scores = torch.sigmoid(x @ mod.weight.float().T) + mod.e_score_correction_bias
            s = scores.sort(dim=-1, descending=True).values
            k = mod.top_k
            margin = float((s[:, k - 1] - s[:, k]).min())
            self.router_margin[li] = min(margin, self.router_margin.get(li, math.inf))
            order = idx.sort(dim=-1)
            self.router[li] = (order.values.tolist(),
                               weights.gather(1, order.indices).double().tolist())
        return hook

    def _stash(self, li, key):
        def hook(mod, args, out):
            self.stash[(li, key)] = out.detach()
        return hook

    def _indexer_hook(self, li):
        def hook(mod, args, kwargs, out):
            sel = out[0]  # [S, W] slot indices, -1 = none
            self.dsa[li] = [sorted(int(v) for v in row if v >= 0) for row in sel.tolist()]
            # The index score of every complete pool for every query, as the indexer computes
            # it (no cache: the step holds every token), for the k-th vs (k+1)-th margin.
            hs = kwargs.get("hidden_states", args[0] if args else None)
            s_len = hs.shape[1]
            P, d = mod.index_kpool, mod.head_dim
            k = mod.k_norm(mod.wk(hs))[0]
            z = torch.nn.functional.linear(hs, mod.index_kpool_compress_gate)[0]
            n_pools = s_len // P
            if n_pools == 0:
                return
            kk = k[: n_pools * P].view(n_pools, P, d)
            zz = z[: n_pools * P].view(n_pools, P, d).float() + mod.index_kpool_compress_ape.float()
            pooled = (zz.softmax(dim=1) * kk).sum(dim=1)
            q = self.stash[(li, "q")][0].view(s_len, mod.n_heads, d).float()
            w = self.stash[(li, "w")][0].float() * mod.n_heads ** -0.5
            sc = torch.relu(torch.einsum("shd,pd->shp", q, pooled.float()) * mod.softmax_scale)
            score = torch.einsum("sh,shp->sp", w, sc)
            kp = mod.index_topk // P
            margin = math.inf
            for t in range(s_len):
                n_sel = (t + 1) // P  # complete pools whose last token is <= t
                if n_sel <= kp:
                    continue
                v = score[t, :n_sel].sort(descending=True).values
                margin = min(margin, float(v[kp - 1] - v[kp]))
            self.pool_margin[li] = min(margin, self.pool_margin.get(li, math.inf))
        return hook


@contextmanager
def clamp_counter(model, limit_override=None):
    """Counts the gate/up values past swiglu_limit per FFN kind (dense, shared, routed);
    with limit_override the clamp limit of every FFN is replaced for the duration."""
    mg = __import__("transformers.models.glm5_next.modeling_glm5_next", fromlist=["x"])
    counts = {k: [0, 0, 0] for k in ("dense", "shared", "routed")}  # [values, gate>, |up|>]
    mods = [m for m in model.modules() if isinstance(m, (mg.Glm5NextTextMLP, mg.Glm5NextTextExperts))]
    saved = [m.swiglu_limit for m in mods]
    handles = []

    def count(kind, gate, up, limit):
        c = counts[kind]
        c[0] += gate.numel()
        c[1] += int((gate > limit).sum())
        c[2] += int((up.abs() > limit).sum())

    for m in mods:
        if limit_override is not None:
            m.swiglu_limit = limit_override
        if isinstance(m, mg.Glm5NextTextMLP):
            kind = "shared" if m.intermediate_size == TEXT_CONFIG["moe_intermediate_size"] else "dense"

            def hook(mod, args, kind=kind):
                x = args[0]
                count(kind, mod.gate_proj(x), mod.up_proj(x), TEXT_CONFIG["swiglu_limit"])
            handles.append(m.register_forward_pre_hook(hook))
    orig = mg.Glm5NextTextExperts._apply_gate

    def apply_gate(self, gate_up):
        gate, up = gate_up.chunk(2, dim=-1)
        count("routed", gate, up, TEXT_CONFIG["swiglu_limit"])
        return orig(self, gate_up)

    mg.Glm5NextTextExperts._apply_gate = apply_gate
    try:
        yield counts
    finally:
        mg.Glm5NextTextExperts._apply_gate = orig
        for h in handles:
            h.remove()
        for m, s in zip(mods, saved):
            m.swiglu_limit = s


# --------------------------------------------------------------------------------------------
# Runs


def forward_logits(model, ids):
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids]), use_cache=False).logits[0].float()


def cached_chunks(model, ids, chunks):
    """Feeds ids in consecutive cached steps of the given sizes (the last repeated until the
    end); returns every position's logits."""
    rows, cache, i, c = [], None, 0, 0
    with torch.no_grad():
        while i < len(ids):
            n = chunks[min(c, len(chunks) - 1)]
            out = model(input_ids=torch.tensor([ids[i:i + n]]), cache=cache, use_cache=True)
            cache = out.cache
            rows.append(out.logits[0].float())
            i += n
            c += 1
    return torch.cat(rows, dim=0)


def analyse(model, ids, full: bool) -> dict:
    res = {"greedy": gc.greedy_reference(model, ids, NEW_TOKENS)}
    seq = ids + res["greedy"]["greedy_ids"][:-1]
    rec = Recorder(model)
    try:
        with clamp_counter(model) as clamps:
            forward_logits(model, seq)
        res["router_margin"] = min(rec.router_margin.values())
        res["pool_margin"] = min(rec.pool_margin.values())
        res["pool_margins"] = {k: float(f"{v:.2e}") for k, v in rec.pool_margin.items()}
        res["clamped"] = {k: {"values": v[0], "gate_above": v[1] / v[0], "up_outside": v[2] / v[0]}
                          for k, v in clamps.items()}
        if not full:
            return res
        rec.reset()
        res["logits"] = forward_logits(model, ids)
        res["router"] = dict(sorted(rec.router.items()))
        res["dsa"] = dict(sorted(rec.dsa.items()))
    finally:
        rec.remove()
    for name, chunks in (("prefill16", [16, 1]), ("chunked", CHUNKS)):
        res[name] = cached_chunks(model, ids, chunks)
        res[name + "_diff"] = float((res[name] - res["logits"]).abs().max())
    res["step0_diff"] = float((res["logits"][-1] - torch.from_numpy(
        res["greedy"]["step_logits"][0])).abs().max())
    with clamp_counter(model, limit_override=1e30):
        res["unclamped_diff"] = float((forward_logits(model, ids) - res["logits"]).abs().max())
    return res


def acceptable(res) -> tuple[bool, str]:
    g = res["greedy"]
    distinct = len(set(g["greedy_ids"]))
    clamped = {k: max(v["gate_above"], v["up_outside"]) for k, v in res["clamped"].items()}
    msg = (f"greedy {g['greedy_ids']} distinct={distinct} margin={g['min_top1_top2_margin']:.4f} "
           f"router={res['router_margin']:.2e} pool={res['pool_margin']:.2e} {res['pool_margins']} clamped={clamped}")
    ok = distinct >= MIN_DISTINCT and g["min_top1_top2_margin"] >= MIN_MARGIN
    ok = ok and res["router_margin"] >= MIN_ROUTER_MARGIN and res["pool_margin"] >= MIN_POOL_MARGIN
    ok = ok and all(v >= MIN_CLAMPED for v in clamped.values())
    # No special id (EOS = 0) among the greedy tokens: an engine's generator may stop on it.
    ok = ok and not set(g["greedy_ids"]) & set(range(len(gc.SPECIAL_TOKENS)))
    return ok, msg


def tensor_keys(st_path: Path) -> dict:
    from safetensors import safe_open

    with safe_open(str(st_path), "pt") as f:
        keys = sorted(f.keys())
        dtypes = sorted({str(f.get_slice(k).get_dtype()) for k in keys})
    text = [k for k in keys if not k.startswith("model.visual.")]
    layer0 = sorted(k.split("layers.0.", 1)[1] for k in text if ".layers.0." in k)
    layer1 = sorted(k.split("layers.1.", 1)[1] for k in text if ".layers.1." in k)
    return {"tensor_count": len(keys), "vision_tensor_count": len(keys) - len(text),
            "on_disk_dtypes": dtypes,
            "top_level_text_keys": [k for k in text if ".layers." not in k],
            "kda_layer_keys": layer0, "indexed_moe_layer_keys": layer1}


def write(seed: int, res: dict, model, ids: list[int]) -> dict:
    for k in ("prefill16_diff", "chunked_diff", "step0_diff"):
        assert res[k] < 1e-4, (k, res[k])
    assert res["greedy"]["decode_vs_full_forward_max_abs_diff"] < 1e-4
    assert res["unclamped_diff"] > 1e-2, res["unclamped_diff"]
    files = {}
    for key, arr in (("logits", res["logits"].numpy()), ("decode_logits", res["greedy"]["step_logits"]),
                     ("prefill16_logits", res["prefill16"].numpy()),
                     ("chunked_logits", res["chunked"].numpy())):
        files[key] = gc.save_npy_f32(OUT_DIR / f"{key}.npy", arr)
    gc.write_json(OUT_DIR / "router.json", {str(li): v[0] for li, v in res["router"].items()})
    gc.write_json(OUT_DIR / "router_weights.json", {str(li): v[1] for li, v in res["router"].items()})
    gc.write_json(OUT_DIR / "dsa_topk.json", {str(li): v for li, v in res["dsa"].items()})
    tc = model.config.text_config
    golden = {
        **gc.versions(),
        "generator": "tools/gen_glm5_next_golden.py",
        "model_dir": f"tests/golden/moe/{NAME}",
        "architecture": "Glm5NextForConditionalGeneration",
        "weights_dtype": "float32", "compute_dtype": "float32",
        "attn_implementation": "eager", "experts_implementation": "eager",
        "fla_installed": _importable("fla"), "causal_conv1d_installed": _importable("causal_conv1d"),
        "seed": seed,
        "init": {"initializer_range": INIT_STD, "norm_weight": f"1 + {NORM_JITTER} N(0,1)",
                 "biases_and_e_score_correction_bias": f"{BIAS_STD} N(0,1)",
                 "hc_fn": "0.1 N(0,1)", "hc_base": "0.5 N(0,1)", "hc_scale": "1 + 0.3 N(0,1)",
                 "index_kpool_compress_ape": "0.5 N(0,1)", "A_log": "0.5 N(0,1)",
                 "ffn_gate_up_scale": SWIGLU_SCALE},
        **tensor_keys(OUT_DIR / "model.safetensors"),
        "config_summary": {
            "layer_types": tc.layer_types, "indexer_types": tc.indexer_types,
            "mlp_layer_types": tc.mlp_layer_types, "kda_chunk_size": 64,
            "dense_regime_last_position": (tc.index_topk // tc.index_kpool + 1) * tc.index_kpool - 2,
            "note": "a query at position t sees every earlier key iff floor((t+1)/index_kpool) <= "
                    "index_topk/index_kpool (complete pools fit the budget)",
        },
        "prompt_seed": PROMPT_SEED, "prompt_ids": ids,
        "greedy_ids": res["greedy"]["greedy_ids"],
        "greedy_note": f"generate(do_sample=False, max_new_tokens={NEW_TOKENS}), EOS disabled: new tokens only",
        "files": {k: {"file": f"{k}.npy", "shape": v} for k, v in files.items()},
        "logits_note": f"prompt forward, no cache, all {PROMPT_LEN} positions (KDA chunked form)",
        "decode_logits_note": "raw logits of generate step i (cache; KDA recurrent form); argmax == "
                              "greedy_ids[i]; row 0 == logits[-1]",
        "prefill16_logits_note": "forward(prompt[:16], cache) then one token at a time; row i predicts "
                                 "prompt[i+1]",
        "chunked_logits_note": f"prompt fed in cached steps of {CHUNKS} tokens (chunked form with "
                               "the carried recurrent and conv state)",
        "prefill16_vs_logits_max_abs_diff": res["prefill16_diff"],
        "chunked_vs_logits_max_abs_diff": res["chunked_diff"],
        "decode_vs_full_forward_max_abs_diff": res["greedy"]["decode_vs_full_forward_max_abs_diff"],
        "decode_step0_vs_logits_max_abs_diff": res["step0_diff"],
        "min_top1_top2_margin": res["greedy"]["min_top1_top2_margin"],
        "greedy_distinct_tokens": len(set(res["greedy"]["greedy_ids"])),
        "router_note": "{moe layer: [[expert ids ascending] per prompt token]}; router_weights.json "
                       "the final weights in the same order",
        "min_router_margin": res["router_margin"],
        "dsa_topk_note": "{full indexer layer: [[key slots ascending] per query]}: the selected "
                         "complete pools' slots plus the query's unfinished pool (tail), for the prompt "
                         "forward; layer 2 (shared) reuses layer 1's",
        "dsa_shared_layers": {"2": 1},
        "min_pool_margin": res["pool_margin"],
        "pool_margin_note": "k-th minus (k+1)-th pool index score among selectable pools, queries with "
                            "more than index_topk/index_kpool selectable pools, no-cache forward over "
                            "prompt + greedy_ids[:-1]",
        "swiglu_clamped_fraction": res["clamped"],
        "swiglu_clamp_note": "fraction of gate values > swiglu_limit and of |up| > swiglu_limit per "
                             "FFN kind, same forward as the margins",
        "unclamped_vs_logits_max_abs_diff": res["unclamped_diff"],
        "unclamped_note": "prompt logits with every FFN's clamp lifted differ by this much: the clamp binds",
        "prompt_logits_std": float(res["logits"].std()),
    }
    gc.write_json(OUT_DIR / "golden.json", golden)
    return golden


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def main() -> None:
    torch.set_num_threads(1)
    assert not _importable("fla"), "fla is installed: HF would run its Triton KDA kernels instead"
    ids = prompt_ids()
    chosen = None
    for seed in range(SEED_BASE, SEED_BASE + N_SEEDS):
        with tempfile.TemporaryDirectory() as tmp:
            build_and_save(seed, Path(tmp))
            res = analyse(load_reference(Path(tmp)), ids, full=False)
        ok, msg = acceptable(res)
        print(f"seed {seed}: {'OK' if ok else 'no'} {msg}", flush=True)
        if ok:
            chosen = seed
            break
    if chosen is None:
        raise RuntimeError("no acceptable seed")
    if OUT_DIR.exists():
        shutil.rmtree(OUT_DIR)
    OUT_DIR.mkdir(parents=True)
    build_and_save(chosen, OUT_DIR)
    gc.save_hf_tokenizer(gc.train_bytelevel_bpe(VOCAB), OUT_DIR, model_max_length=4096)
    model = load_reference(OUT_DIR)
    res = analyse(model, ids, full=True)
    ok, msg = acceptable(res)
    assert ok, msg
    golden = write(chosen, res, model, ids)
    total = sum(f.stat().st_size for f in OUT_DIR.iterdir())
    assert total < MAX_BYTES, total
    print(f"[{NAME}] seed {chosen} -> {OUT_DIR} ({total} bytes); greedy {golden['greedy_ids']}")


if __name__ == "__main__":
    main()
