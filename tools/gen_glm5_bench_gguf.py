#!/usr/bin/env python3
"""Writes a random-weight GGUF shaped like GLM-5 (MLA + DSA indexer + MoE), for DSA scaling benchmarks.

The file is what llama.cpp's convert_hf_to_gguf.py writes for a glm_moe_dsa checkpoint
(architecture `glm-dsa`: the same tensor names and metadata keys, checked against the real
converter output in tests/golden/moe_gguf/manifest.json), with GLM-5's attention at its real
sizes and the rest scaled down so that a 32K-token prefill runs on a small machine:

  - real (GLM-5): 64 MLA heads, q_lora 2048, kv_lora 512, qk_nope 192, qk_rope 64, v 256;
    DSA indexer 32 heads of 128, index_topk 2048 (every layer a full indexer layer, as
    GLM-5/5.1), interleaved RoPE, theta 1e6
  - scaled down: hidden 2048 (GLM-5: 6144), 2 layers (--layers N; layer 0 dense with ffn 4096,
    layer 1 MoE), 16 routed experts top-8 of ffn 768 and one shared expert (GLM-5: 256 of 2048),
    vocab 8192 (a byte-level BPE trained as tools/gen_moe_bench_gguf.py does)
  - matrices Q8_0 (--type f16 for F16), the indexer's head weights and norms F32; llama.cpp's
    absorbed attn_k_b / attn_v_b split of kv_b_proj

`--index-topk N` writes the same weights (same seed) with another top-k: N >= the context turns
DSA into dense MLA (every key selected), the baseline DSA is measured against. `--mtp` adds
GLM-5's MTP (NextN) layer after the trunk, as the converter stores it (one more block: a MoE
layer with its own indexer plus nextn.eh_proj and the enorm / hnorm / shared_head_norm
weights), for the cost of a draft step against a trunk step (docs/speculative.md). Weights are
N(0, 0.02) from a fixed seed (norm weights 1); only for speed measurements. Run from the repo
root (docs/benchmarks.md, DSA scaling):

    tools/.venv/bin/python tools/gen_glm5_bench_gguf.py                      # -> models/bench/glm5-mini-q8_0.gguf
    tools/.venv/bin/python tools/gen_glm5_bench_gguf.py --index-topk 65536   # -> models/bench/glm5-mini-dense-q8_0.gguf
    tools/.venv/bin/python tools/gen_glm5_bench_gguf.py --mtp                # -> models/bench/glm5-mini-mtp-q8_0.gguf
    tools/.venv/bin/python tools/gen_glm5_bench_gguf.py --layers 1 --index-topk 65536
                                                 # -> models/bench/glm5-mini-1l-dense-q8_0.gguf
    tools/.venv/bin/python tools/gen_glm5_bench_gguf.py --layers 1 --real-width --index-topk 65536
                                                 # -> models/bench/glm5-mini-1l-w6144-dense-q8_0.gguf

`--real-width` gives the layers GLM-5's own hidden size and feed-forward widths, so that the
attention's and indexer's share of a token's work is GLM-5's (the scaled-down file overstates
it: its projections and feed-forward are 3-9x smaller).

`--attention deepseek-v3` gives the MLA DeepSeek-V3's sizes instead (128 heads, q_lora 1536,
qk_nope 128, v 128; with --real-width also its hidden 7168 and ffn widths 18432 / 2048), for
the absorbed against the expanded MLA form (`--mla-form`), where DeepSeek-V3's shapes are the
ones expanding pays for. Written with `--index-topk 65536` the indexer keeps every key and is
skipped, so the file runs as DeepSeek-V3's dense MLA:

    tools/.venv/bin/python tools/gen_glm5_bench_gguf.py --layers 1 --real-width \
        --attention deepseek-v3 --index-topk 65536   # -> models/bench/dsv3attn-1l-w7168-dense-q8_0.gguf
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import gguf
import numpy as np
from gguf import quants

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_moe_bench_gguf import check_against_manifest, make_tensor, train_tokenizer  # noqa: E402
from golden_common import CHATML_TEMPLATE, REPO_ROOT  # noqa: E402

ARCH = "glm-dsa"

# GLM-5's attention and indexer sizes (config.json of zai-org/GLM-5; /work/shared/models.md 2.4.1).
HEADS = 64
Q_LORA = 2048
KV_LORA = 512
QK_NOPE = 192
QK_ROPE = 64
V_HEAD = 256
INDEX_HEADS = 32
INDEX_DIM = 128
INDEX_TOPK = 2048
ROPE_THETA = 1e6
# Scaled down.
LAYERS = 2
DENSE_LAYERS = 1
HIDDEN = 2048
DENSE_FFN = 4096
EXPERTS = 16
EXPERTS_USED = 8
EXPERT_FFN = 768
VOCAB = 8192
CONTEXT = 65536  # room for a 32K depth plus the prompt of every bench test
RMS_EPS = 1e-5
ROUTED_SCALE = 2.5


def tensor_specs(mtp: bool = False,
                 layers: int = LAYERS) -> list[tuple[str, tuple[int, ...], bool]]:
    """(name, outer-first shape, quantised?) in the converter's order; `mtp`: the NextN block
    after `layers` trunk layers (the first DENSE_LAYERS of them dense)."""
    specs = [("output.weight", (VOCAB, HIDDEN), True), ("token_embd.weight", (VOCAB, HIDDEN), True)]
    for b in range(layers + int(mtp)):
        p = f"blk.{b}."
        specs.append((p + "attn_norm.weight", (HIDDEN,), False))
        if b < DENSE_LAYERS:
            specs += [(p + "ffn_down.weight", (HIDDEN, DENSE_FFN), True),
                      (p + "ffn_gate.weight", (DENSE_FFN, HIDDEN), True),
                      (p + "ffn_up.weight", (DENSE_FFN, HIDDEN), True)]
        else:
            specs += [(p + "ffn_down_exps.weight", (EXPERTS, HIDDEN, EXPERT_FFN), True),
                      (p + "ffn_gate_exps.weight", (EXPERTS, EXPERT_FFN, HIDDEN), True),
                      (p + "ffn_up_exps.weight", (EXPERTS, EXPERT_FFN, HIDDEN), True),
                      (p + "exp_probs_b.bias", (EXPERTS,), False),
                      (p + "ffn_gate_inp.weight", (EXPERTS, HIDDEN), False),
                      (p + "ffn_down_shexp.weight", (HIDDEN, EXPERT_FFN), True),
                      (p + "ffn_gate_shexp.weight", (EXPERT_FFN, HIDDEN), True),
                      (p + "ffn_up_shexp.weight", (EXPERT_FFN, HIDDEN), True)]
        specs += [
            (p + "ffn_norm.weight", (HIDDEN,), False),
            (p + "indexer.k_norm.bias", (INDEX_DIM,), False),
            (p + "indexer.k_norm.weight", (INDEX_DIM,), False),
            (p + "indexer.proj.weight", (INDEX_HEADS, HIDDEN), False),
            (p + "indexer.attn_k.weight", (INDEX_DIM, HIDDEN), True),
            (p + "indexer.attn_q_b.weight", (INDEX_HEADS * INDEX_DIM, Q_LORA), True),
            (p + "attn_kv_a_norm.weight", (KV_LORA,), False),
            (p + "attn_kv_a_mqa.weight", (KV_LORA + QK_ROPE, HIDDEN), True),
            (p + "attn_k_b.weight", (HEADS, KV_LORA, QK_NOPE), True),
            (p + "attn_v_b.weight", (HEADS, V_HEAD, KV_LORA), True),
            (p + "attn_output.weight", (HIDDEN, HEADS * V_HEAD), True),
            (p + "attn_q_a_norm.weight", (Q_LORA,), False),
            (p + "attn_q_a.weight", (Q_LORA, HIDDEN), True),
            (p + "attn_q_b.weight", (HEADS * (QK_NOPE + QK_ROPE), Q_LORA), True),
        ]
        if b == layers:  # the MTP layer: [enorm(embedding) | hnorm(hidden)] -> eh_proj -> block
            specs += [(p + "nextn.eh_proj.weight", (HIDDEN, 2 * HIDDEN), True),
                      (p + "nextn.enorm.weight", (HIDDEN,), False),
                      (p + "nextn.hnorm.weight", (HIDDEN,), False),
                      (p + "nextn.shared_head_norm.weight", (HIDDEN,), False)]
    specs.append(("output_norm.weight", (HIDDEN,), False))
    return specs


def check_nextn_names(specs) -> None:
    """The NextN tensors must be named as the converter names them: tests/golden/mtp's combined
    GGUF was written by llama.cpp's convert_hf_to_gguf.py (the manifest has no MTP layer)."""
    ref = gguf.GGUFReader(REPO_ROOT / "tests" / "golden" / "mtp" / "glm_moe_dsa_mtp.gguf")
    ref_names = {re.sub(r"^blk\.\d+\.", "blk.N.", t.name) for t in ref.tensors}
    for name, _, _ in specs:
        if ".nextn." in name and re.sub(r"^blk\.\d+\.", "blk.N.", name) not in ref_names:
            raise SystemExit(f"tensor {name} is not a name llama.cpp's converter writes for {ARCH}")


def parameter_counts(specs) -> tuple[int, int]:
    """(total, active per token) as anymoe's CountParameters counts them."""
    total = active = 0
    for name, shape, _ in specs:
        n = int(np.prod(shape))
        total += n
        if "_exps." in name:
            active += n * EXPERTS_USED // EXPERTS
        elif name != "token_embd.weight":
            active += n
    return total, active


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--type", choices=["q8_0", "f16"], default="q8_0", help="matrix type")
    ap.add_argument("--index-topk", type=int, default=INDEX_TOPK,
                    help="keys kept per query (>= the context: dense MLA)")
    ap.add_argument("--mtp", action="store_true", help="add the MTP (NextN) layer after the trunk")
    ap.add_argument("--layers", type=int, default=LAYERS,
                    help="trunk layers (1: the dense layer alone, for a cheap 32K-context "
                         "attention measurement)")
    ap.add_argument("--real-width", action="store_true",
                    help="GLM-5's own hidden 6144, dense ffn 12288 and expert ffn 2048 (16 "
                         "experts still): a layer costs per token what a GLM-5 layer costs")
    ap.add_argument("--attention", choices=["glm-5", "deepseek-v3"], default="glm-5",
                    help="whose MLA sizes (heads, q_lora, qk_nope, v) the layers get")
    ap.add_argument("--out", help="default models/bench/glm5-mini[-Nl][-w6144][-dense][-mtp]-TYPE.gguf "
                                  "(dsv3attn[-Nl][-w7168]... with --attention deepseek-v3)")
    args = ap.parse_args()
    global HIDDEN, DENSE_FFN, EXPERT_FFN, HEADS, Q_LORA, QK_NOPE, V_HEAD
    dsv3 = args.attention == "deepseek-v3"
    if dsv3:  # config.json of deepseek-ai/DeepSeek-V3
        HEADS, Q_LORA, QK_NOPE, V_HEAD = 128, 1536, 128, 128
    if args.real_width:
        HIDDEN, DENSE_FFN, EXPERT_FFN = (7168, 18432, 2048) if dsv3 else (6144, 12288, 2048)
    if args.index_topk < 1:
        raise SystemExit("--index-topk must be at least 1")
    if args.layers < 1:
        raise SystemExit("--layers must be at least 1")
    dense_layers = min(DENSE_LAYERS, args.layers)
    suffix = "" if args.index_topk == INDEX_TOPK else ("-dense" if args.index_topk >= CONTEXT
                                                      else f"-topk{args.index_topk}")
    suffix += "-mtp" if args.mtp else ""
    suffix = (f"-w{HIDDEN}" if args.real_width else "") + suffix
    suffix = ("" if args.layers == LAYERS else f"-{args.layers}l") + suffix
    stem = "dsv3attn" if dsv3 else "glm5-mini"
    out = Path(args.out or REPO_ROOT / "models" / "bench" / f"{stem}{suffix}-{args.type}.gguf")
    qtype = {"q8_0": gguf.GGMLQuantizationType.Q8_0, "f16": gguf.GGMLQuantizationType.F16}[args.type]
    file_type = {"q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "f16": gguf.LlamaFileType.MOSTLY_F16}[args.type]

    specs = tensor_specs(args.mtp, args.layers)
    total, active = parameter_counts(specs)
    print(f"parameters: {total:,} total ({total / 1e6:.1f}M), {active:,} active per token "
          f"({active / 1e6:.1f}M)")
    print(f"training the {VOCAB}-token byte-level BPE on the Python standard library ...")
    tokens, token_types, merges = train_tokenizer(VOCAB)

    out.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(out, ARCH)
    k = f"{ARCH}."
    expert_params = 3 * HIDDEN * EXPERT_FFN
    keys = {"general.architecture": "STRING"}  # key -> GGUF type, checked against the converter's

    def put(key: str, kind: str, value) -> None:
        keys[key] = kind
        {"STRING": w.add_string, "UINT32": w.add_uint32, "FLOAT32": w.add_float32,
         "BOOL": w.add_bool}[kind](key, value)

    moe_layers = args.layers + int(args.mtp) - dense_layers
    put("general.type", "STRING", "model")
    put("general.name", "STRING", ("GLM-5-mini with DeepSeek-V3's attention" if dsv3 else
                                   "GLM-5-mini") + " (random weights, benchmark only)")
    put("general.size_label", "STRING",
        gguf.size_label(total, total - EXPERTS * moe_layers * expert_params,
                        expert_params * moe_layers, EXPERTS))
    # The converter counts the MTP layer.
    put(k + "block_count", "UINT32", args.layers + int(args.mtp))
    put(k + "context_length", "UINT32", CONTEXT)
    put(k + "embedding_length", "UINT32", HIDDEN)
    put(k + "feed_forward_length", "UINT32", DENSE_FFN)
    put(k + "attention.head_count", "UINT32", HEADS)
    put(k + "attention.head_count_kv", "UINT32", 1)  # the MQA view of the latent, as the converter
    put(k + "rope.freq_base", "FLOAT32", ROPE_THETA)
    put(k + "attention.layer_norm_rms_epsilon", "FLOAT32", RMS_EPS)
    put(k + "expert_count", "UINT32", EXPERTS)
    put(k + "expert_used_count", "UINT32", EXPERTS_USED)
    put(k + "expert_group_count", "UINT32", 1)
    put(k + "expert_group_used_count", "UINT32", 1)
    put(k + "expert_gating_func", "UINT32", int(gguf.ExpertGatingFuncType.SIGMOID))
    put(k + "attention.key_length", "UINT32", KV_LORA + QK_ROPE)
    put(k + "attention.value_length", "UINT32", KV_LORA)
    put("general.file_type", "UINT32", int(file_type))
    put(k + "leading_dense_block_count", "UINT32", dense_layers)
    put(k + "vocab_size", "UINT32", VOCAB)
    put(k + "attention.q_lora_rank", "UINT32", Q_LORA)
    put(k + "attention.kv_lora_rank", "UINT32", KV_LORA)
    put(k + "attention.key_length_mla", "UINT32", QK_NOPE + QK_ROPE)
    put(k + "attention.value_length_mla", "UINT32", V_HEAD)
    put(k + "expert_feed_forward_length", "UINT32", EXPERT_FFN)
    put(k + "expert_shared_count", "UINT32", 1)
    put(k + "expert_weights_scale", "FLOAT32", ROUTED_SCALE)
    put(k + "expert_weights_norm", "BOOL", True)
    put(k + "rope.dimension_count", "UINT32", QK_ROPE)
    put(k + "nextn_predict_layers", "UINT32", int(args.mtp))
    put(k + "attention.indexer.head_count", "UINT32", INDEX_HEADS)
    put(k + "attention.indexer.key_length", "UINT32", INDEX_DIM)
    put(k + "attention.indexer.top_k", "UINT32", args.index_topk)
    put("general.quantization_version", "UINT32", gguf.GGML_QUANT_VERSION)
    put("tokenizer.ggml.model", "STRING", "gpt2")
    put("tokenizer.ggml.pre", "STRING", "gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(token_types)
    w.add_token_merges(merges)
    put("tokenizer.ggml.bos_token_id", "UINT32", tokens.index("<|endoftext|>"))
    put("tokenizer.ggml.eos_token_id", "UINT32", tokens.index("<|endoftext|>"))
    put("tokenizer.chat_template", "STRING", CHATML_TEMPLATE)
    check_against_manifest(keys, [t for t in specs if ".nextn." not in t[0]], ARCH)
    check_nextn_names(specs)

    def data(i: int, name: str, shape: tuple[int, ...], quantised: bool) -> np.ndarray:
        x = make_tensor(i, name, shape, np.float32)
        return quants.quantize(x, qtype) if quantised else x

    for i, (name, shape, quantised) in enumerate(specs):
        if quantised:
            nbytes = int(np.prod(shape[:-1])) * quants.quant_shape_to_byte_shape(shape, qtype)[-1]
            w.add_tensor_info(name, shape, np.dtype(np.float32), nbytes, raw_dtype=qtype)
        else:
            w.add_tensor_info(name, shape, np.dtype(np.float32), int(np.prod(shape)) * 4)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for i, (name, shape, quantised) in enumerate(specs):
        w.write_tensor_data(data(i, name, shape, quantised))
        print(f"\rwrote {i + 1}/{len(specs)} tensors", end="", flush=True)
    w.close()
    print(f"\n{out}: {out.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
