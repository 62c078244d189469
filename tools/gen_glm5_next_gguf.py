#!/usr/bin/env python3
"""Converts a glm5_next (GLM-5.3-Flash) HF folder to GGUF with the `gguf` package.

llama.cpp has no glm5_next architecture (nor mHC or KPool); this converter
defines one, `glm5-next`, in llama.cpp's style: llama.cpp's key and tensor
names wherever the concept exists there (deepseek2 / glm-dsa for the MLA, the
DSA indexer and the MoE; kimi-linear for the KDA layers' tensors; the
`ssm.conv_kernel` key), ours for the rest (docs/models.md lists which is which).
Only the text model is converted (`model.language_model.*`, `lm_head`); the
vision tower and projector are left out. As llama.cpp's deepseek2 converter
does, kv_b_proj is split into the absorbed pair attn_k_b / attn_v_b.

Weights are written float32, bit-identical to the safetensors, so the HF
goldens of the folder apply to the file; with --q8_0 every matrix whose rows
are a multiple of 32 wide (attention, KDA and indexer projections, dense,
shared and routed experts, embeddings, output) is quantised with gguf-py's
reference Q8_0 (`gguf.quants.quantize`); norms, biases, convolutions, the mHC
and KPool parameters, the router and the kv_b halves stay float32.

The tokenizer metadata (gpt2 BPE) is copied from the llama.cpp-converted
tests/golden/moe_gguf/glm_moe_dsa.gguf, whose source folder has the same
tokenizer.json (checked byte for byte). Run from the repo root:

    tools/.venv/bin/python tools/gen_glm5_next_gguf.py
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import gguf
import numpy as np
from safetensors.numpy import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from golden_common import REPO_ROOT  # noqa: E402

ARCH = "glm5-next"
TEXT_PREFIX = "model.language_model."
TOKENIZER_SOURCE = REPO_ROOT / "tests" / "golden" / "moe_gguf" / "glm_moe_dsa.gguf"
TOKENIZER_FOLDER = REPO_ROOT / "tests" / "golden" / "moe" / "glm_moe_dsa"

# HF layer-relative module -> GGUF name (same .weight/.bias suffix).
LAYER_MODULES = {
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
    # KDA (llama.cpp's kimi-linear names)
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.q_conv1d": "ssm_conv1d_q",
    "self_attn.k_conv1d": "ssm_conv1d_k",
    "self_attn.v_conv1d": "ssm_conv1d_v",
    "self_attn.f_a_proj": "ssm_f_a",
    "self_attn.f_b_proj": "ssm_f_b",
    "self_attn.b_proj": "ssm_beta",
    "self_attn.g_a_proj": "ssm_g_a",
    "self_attn.g_b_proj": "ssm_g_b",
    "self_attn.o_norm": "ssm_norm",
    "self_attn.o_proj": "attn_output",
    # MLA + indexer (deepseek2 / glm-dsa names)
    "self_attn.q_a_proj": "attn_q_a",
    "self_attn.q_a_layernorm": "attn_q_a_norm",
    "self_attn.q_b_proj": "attn_q_b",
    "self_attn.kv_a_proj_with_mqa": "attn_kv_a_mqa",
    "self_attn.kv_a_layernorm": "attn_kv_a_norm",
    "self_attn.indexer.wq_b": "indexer.attn_q_b",
    "self_attn.indexer.wk": "indexer.attn_k",
    "self_attn.indexer.k_norm": "indexer.k_norm",
    "self_attn.indexer.weights_proj": "indexer.proj",
    # FFN
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "mlp.gate": "ffn_gate_inp",
    "mlp.shared_experts.gate_proj": "ffn_gate_shexp",
    "mlp.shared_experts.up_proj": "ffn_up_shexp",
    "mlp.shared_experts.down_proj": "ffn_down_shexp",
}

# HF parameters without a .weight/.bias suffix -> full GGUF tail. dt_bias is
# llama.cpp's ssm_dt.bias; the others are ours. A_log is kept as stored
# (llama.cpp's recurrent converters store -exp(A_log) as ssm_a; we do not, so
# the file holds the checkpoint's values bit for bit).
LAYER_PARAMETERS = {
    "self_attn.dt_bias": "ssm_dt.bias",
    "self_attn.A_log": "ssm_a_log",
    "mlp.gate.e_score_correction_bias": "exp_probs_b.bias",
    "self_attn.indexer.index_kpool_compress_ape": "indexer.kpool_ape",
    "self_attn.indexer.index_kpool_compress_gate": "indexer.kpool_gate",
    "hc_attn_fn": "hc_attn_fn",
    "hc_attn_base": "hc_attn_base",
    "hc_attn_scale": "hc_attn_scale",
    "hc_ffn_fn": "hc_ffn_fn",
    "hc_ffn_base": "hc_ffn_base",
    "hc_ffn_scale": "hc_ffn_scale",
}

GLOBALS = {
    TEXT_PREFIX + "embed_tokens.weight": "token_embd.weight",
    TEXT_PREFIX + "norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}


def text_config(folder: Path) -> dict:
    config = json.loads((folder / "config.json").read_text())
    if config.get("model_type") != "glm5_next":
        raise SystemExit(f"{folder}: model_type {config.get('model_type')!r} is not glm5_next")
    return config.get("text_config") or config


def write_metadata(w: gguf.GGUFWriter, c: dict, n_layers: int) -> None:
    p = ARCH + "."
    u32, f32, bool_ = w.add_uint32, w.add_float32, w.add_bool
    w.add_name("Glm5_Next")
    u32(p + "block_count", n_layers)
    u32(p + "nextn_predict_layers", 0)
    u32(p + "context_length", c["max_position_embeddings"])
    u32(p + "embedding_length", c["hidden_size"])
    u32(p + "feed_forward_length", c["intermediate_size"])
    u32(p + "vocab_size", c["vocab_size"])
    u32(p + "attention.head_count", c["num_attention_heads"])
    u32(p + "attention.head_count_kv", 1)  # the MQA view of the latent, as deepseek2
    f32(p + "attention.layer_norm_rms_epsilon", c["rms_norm_eps"])
    # NoPE MLA: no rotary part, so no rope.dimension_count.
    u32(p + "attention.q_lora_rank", c["q_lora_rank"])
    u32(p + "attention.kv_lora_rank", c["kv_lora_rank"])
    u32(p + "attention.key_length_mla", c["qk_nope_head_dim"])
    u32(p + "attention.value_length_mla", c["v_head_dim"])
    if c.get("qk_rope_head_dim", 0) != 0:
        raise SystemExit("qk_rope_head_dim != 0: glm5_next's attention is NoPE")
    # DSA indexer (glm-dsa's keys) and KPool (ours).
    u32(p + "attention.indexer.head_count", c["index_n_heads"])
    u32(p + "attention.indexer.key_length", c["index_head_dim"])
    u32(p + "attention.indexer.top_k", c["index_topk"])
    types = c.get("indexer_types") or ["full"] * n_layers
    w.add_array(p + "attention.indexer.types", [t == "full" for t in types])
    u32(p + "attention.indexer.kpool", c["index_kpool"])
    bool_(p + "attention.indexer.kpool_select_tail", bool(c["index_kpool_always_select_tail"]))
    # Layer kinds (ours): true for KDA linear attention, false for indexed MLA.
    layer_types = c.get("layer_types") or [
        "linear_attention" if i % 4 != 3 else "indexed_attention" for i in range(n_layers)]
    w.add_array(p + "kda.layers", [t == "linear_attention" for t in layer_types])
    u32(p + "kda.head_count", c["linear_num_heads"])
    u32(p + "kda.head_dim", c["linear_head_dim"])
    u32(p + "ssm.conv_kernel", c["linear_conv_kernel_dim"])  # llama.cpp's key
    # Absent key: Glm5NextTextConfig's -5.0; null: the unbounded gate (no key written).
    bound = c.get("linear_lower_bound", -5.0)
    if bound is not None:
        f32(p + "kda.lower_bound", bound)
    # mHC (ours).
    u32(p + "hc.mult", c["hc_mult"])
    u32(p + "hc.sinkhorn_iters", c["hc_sinkhorn_iters"])
    f32(p + "hc.eps", c["hc_eps"])
    f32(p + "swiglu_limit", c["swiglu_limit"])
    # MoE (deepseek2's keys); dense layers only as a leading run.
    mlp = c.get("mlp_layer_types") or ["dense"] * 3 + ["sparse"] * (n_layers - 3)
    dense = mlp.index("sparse") if "sparse" in mlp else len(mlp)
    if any(t != "sparse" for t in mlp[dense:]):
        raise SystemExit(f"mlp_layer_types {mlp}: only a leading run of dense layers converts")
    u32(p + "leading_dense_block_count", dense)
    u32(p + "expert_count", c["n_routed_experts"])
    u32(p + "expert_used_count", c["num_experts_per_tok"])
    u32(p + "expert_feed_forward_length", c["moe_intermediate_size"])
    u32(p + "expert_shared_count", c["n_shared_experts"])
    u32(p + "expert_group_count", c["n_group"])
    u32(p + "expert_group_used_count", c["topk_group"])
    f32(p + "expert_weights_scale", c["routed_scaling_factor"])
    bool_(p + "expert_weights_norm", bool(c["norm_topk_prob"]))
    u32(p + "expert_gating_func", 2)  # sigmoid (LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID)


def copy_tokenizer(w: gguf.GGUFWriter) -> None:
    reader = gguf.GGUFReader(TOKENIZER_SOURCE)
    for field in reader.fields.values():
        if not field.name.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(field.name, field.contents(), vtype, sub_type=sub)


def gguf_tensors(weights: dict[str, np.ndarray], c: dict, n_layers: int):
    """Yields (gguf name, f32 array) for the text model's tensors."""
    for hf, name in GLOBALS.items():
        yield name, weights[hf]
    n_h, dn, dv, r = c["num_attention_heads"], c["qk_nope_head_dim"], c["v_head_dim"], c["kv_lora_rank"]
    for i in range(n_layers):
        pre, blk = f"{TEXT_PREFIX}layers.{i}.", f"blk.{i}."
        rest = {k[len(pre):]: v for k, v in weights.items() if k.startswith(pre)}
        experts: dict[str, dict[int, np.ndarray]] = {}
        for key, value in sorted(rest.items()):
            if key in LAYER_PARAMETERS:
                yield blk + LAYER_PARAMETERS[key], value
                continue
            if key == "self_attn.kv_b_proj.weight":
                kv_b = value.reshape(n_h, dn + dv, r)
                yield blk + "attn_k_b.weight", np.ascontiguousarray(kv_b[:, :dn].transpose(0, 2, 1))
                yield blk + "attn_v_b.weight", np.ascontiguousarray(kv_b[:, dn:])
                continue
            if key.startswith("mlp.experts."):
                _, _, e, proj, _ = key.split(".")
                experts.setdefault(proj, {})[int(e)] = value
                continue
            module, _, suffix = key.rpartition(".")
            if module not in LAYER_MODULES:
                raise SystemExit(f"no GGUF name for {pre}{key}")
            yield blk + LAYER_MODULES[module] + "." + suffix, value
        for proj, short in (("gate_proj", "gate"), ("up_proj", "up"), ("down_proj", "down")):
            if proj in experts:
                stack = [experts[proj][e] for e in range(c["n_routed_experts"])]
                yield blk + f"ffn_{short}_exps.weight", np.stack(stack)


def quantisable(name: str, data: np.ndarray) -> bool:
    keep = ("ffn_gate_inp", "attn_k_b", "attn_v_b", "ssm_conv1d", "hc_", "kpool")
    return data.ndim >= 2 and data.shape[-1] % 32 == 0 and not any(k in name for k in keep)


def convert(folder: Path, out: Path, q8_0: bool) -> None:
    if (folder / "tokenizer.json").read_bytes() != (TOKENIZER_FOLDER / "tokenizer.json").read_bytes():
        raise SystemExit(f"{folder}/tokenizer.json differs from {TOKENIZER_FOLDER}'s")
    c = text_config(folder)
    n_layers = c["num_hidden_layers"]
    weights = {k: v.astype(np.float32) for k, v in load_file(folder / "model.safetensors").items()}
    w = gguf.GGUFWriter(out, ARCH)
    write_metadata(w, c, n_layers)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if q8_0 else gguf.LlamaFileType.ALL_F32)
    copy_tokenizer(w)
    written: dict[str, np.ndarray] = {}
    for name, data in gguf_tensors(weights, c, n_layers):
        data = np.ascontiguousarray(data, dtype=np.float32)
        written[name] = data
        if q8_0 and quantisable(name, data):
            q = gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    check_read_back(out, written)
    print(f"{out}: {out.stat().st_size} bytes, {len(written)} tensors read back")


def check_read_back(path: Path, written: dict[str, np.ndarray]) -> None:
    """Every tensor as GGUFReader reads it: the array written (f32) or its Q8_0 round trip."""
    reader = gguf.GGUFReader(path)
    if {t.name for t in reader.tensors} != set(written):
        raise SystemExit(f"{path}: tensor names read back differ from those written")
    for t in reader.tensors:
        want = written[t.name]
        shape = list(reversed([int(n) for n in t.shape]))
        if t.tensor_type == gguf.GGMLQuantizationType.F32:
            got = np.asarray(t.data, dtype=np.float32).reshape(shape)
            ok = shape == list(want.shape) and np.array_equal(got, want)
        else:
            got = gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape)
            q = gguf.quants.quantize(want, t.tensor_type)
            ok = np.array_equal(got, gguf.quants.dequantize(q, t.tensor_type))
        if not ok:
            raise SystemExit(f"{path}: {t.name} read back differs from what was written")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    golden = REPO_ROOT / "tests" / "golden"
    ap.add_argument("--model", type=Path, default=golden / "moe" / "glm5_next")
    ap.add_argument("--out-dir", type=Path, default=golden / "moe_gguf")
    args = ap.parse_args()
    convert(args.model, args.out_dir / "glm5_next.gguf", q8_0=False)
    convert(args.model, args.out_dir / "glm5_next.q8_0.gguf", q8_0=True)


if __name__ == "__main__":
    main()
