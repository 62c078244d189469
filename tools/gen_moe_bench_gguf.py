#!/usr/bin/env python3
"""Writes a random-weight MoE GGUF shaped like GLM-4.5-Air, scaled down, for benchmarks.

The file is what llama.cpp's convert_hf_to_gguf.py would write for a glm4moe
checkpoint (architecture `glm4moe`, the same tensor names and metadata keys; see
tests/golden/moe_gguf/manifest.json, a real converter output, which this script
checks its names and key types against), with GLM-4.5-Air's structure:

  - 8 layers, all MoE (leading_dense_block_count 0), hidden 1024, untied output
  - GQA: 16 query / 4 KV heads of head_dim 64, q/k/v bias, no qk-norm,
    partial NeoX RoPE on 32 of 64 dims (rope.dimension_count 32), theta 1e6
  - 64 routed experts, top-8, expert ffn 512, one shared expert (ffn 512),
    sigmoid gating (expert_gating_func 2) with the exp_probs_b correction bias,
    expert_weights_norm true, expert_weights_scale 1.0, one expert group
  - vocab 32000: a byte-level BPE (gpt2 model, gpt-2 pre-tokenizer) trained with
    `tokenizers` on the Python standard library's sources, ChatML specials
  - matrices F16, norms and biases F32: ~905M parameters, ~168M active per token

Weights are N(0, 0.02) from a fixed seed (norm weights 1), so the file is the
same on every run with the same Python and package versions. Only for speed
measurements: the model computes nothing meaningful. Quantise it with
llama-quantize (see docs/benchmarks.md). Run from the repo root:

    tools/.venv/bin/python tools/gen_moe_bench_gguf.py [--out models/bench/glm45air-mini-f16.gguf]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import sysconfig
from pathlib import Path

import gguf
import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from golden_common import CHATML_TEMPLATE, REPO_ROOT, SPECIAL_TOKENS  # noqa: E402

ARCH = "glm4moe"
MANIFEST = REPO_ROOT / "tests" / "golden" / "moe_gguf" / "manifest.json"

# The shape (GLM-4.5-Air: hidden 4096, 46 layers, 96/8 heads of 128, 128 experts
# top-8 of ffn 1408, vocab 151552; here scaled down to run on a laptop).
LAYERS = 8
HIDDEN = 1024
HEADS = 16
KV_HEADS = 4
HEAD_DIM = 64
ROTARY_DIMS = 32
EXPERTS = 64
EXPERTS_USED = 8
EXPERT_FFN = 512
SHARED_FFN = 512  # expert_shared_count x expert_feed_forward_length
DENSE_FFN = 2736  # feed_forward_length: Air's 10944 / 4; unused (no dense layer)
VOCAB = 32000
CONTEXT = 131072
ROPE_THETA = 1e6
RMS_EPS = 1e-5
INIT_STD = 0.02
SEED = 4500


def train_tokenizer(vocab_size: int = VOCAB) -> tuple[list[str], list[int], list[str]]:
    """A byte-level BPE (32000 tokens unless told): tokens (by id), token types, merges (by rank)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in stdlib.rglob("*.py") if "site-packages" not in p.parts)
    corpus, size = [], 0
    for p in files:  # ~30 MB of code and docstrings; sorted, so the same every run
        text = p.read_text(encoding="utf-8", errors="replace")
        corpus.append(text)
        size += len(text)
        if size > 30_000_000:
            break
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer, length=len(corpus))
    model = json.loads(tok.to_str())["model"]
    vocab: dict[str, int] = model["vocab"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    if len(vocab) != vocab_size:
        raise SystemExit(f"tokenizer: trained {len(vocab)} tokens, wanted {vocab_size}")
    tokens = [""] * vocab_size
    for text, i in vocab.items():
        tokens[i] = text
    types = [gguf.TokenType.CONTROL if t in SPECIAL_TOKENS else gguf.TokenType.NORMAL for t in tokens]
    return tokens, [int(t) for t in types], merges


def tensor_specs() -> list[tuple[str, tuple[int, ...], type]]:
    """(name, outer-first shape, numpy dtype) in the converter's order."""
    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    f16, f32 = np.float16, np.float32
    specs = [("output.weight", (VOCAB, HIDDEN), f16), ("token_embd.weight", (VOCAB, HIDDEN), f16)]
    for b in range(LAYERS):
        p = f"blk.{b}."
        specs += [
            (p + "attn_norm.weight", (HIDDEN,), f32),
            (p + "ffn_down_exps.weight", (EXPERTS, HIDDEN, EXPERT_FFN), f16),
            (p + "ffn_gate_exps.weight", (EXPERTS, EXPERT_FFN, HIDDEN), f16),
            (p + "ffn_up_exps.weight", (EXPERTS, EXPERT_FFN, HIDDEN), f16),
            (p + "exp_probs_b.bias", (EXPERTS,), f32),
            (p + "ffn_gate_inp.weight", (EXPERTS, HIDDEN), f32),
            (p + "ffn_down_shexp.weight", (HIDDEN, SHARED_FFN), f16),
            (p + "ffn_gate_shexp.weight", (SHARED_FFN, HIDDEN), f16),
            (p + "ffn_up_shexp.weight", (SHARED_FFN, HIDDEN), f16),
            (p + "post_attention_norm.weight", (HIDDEN,), f32),
            (p + "attn_k.bias", (kv,), f32),
            (p + "attn_k.weight", (kv, HIDDEN), f16),
            (p + "attn_output.weight", (HIDDEN, q), f16),
            (p + "attn_q.bias", (q,), f32),
            (p + "attn_q.weight", (q, HIDDEN), f16),
            (p + "attn_v.bias", (kv,), f32),
            (p + "attn_v.weight", (kv, HIDDEN), f16),
        ]
    specs.append(("output_norm.weight", (HIDDEN,), f32))
    return specs


def make_tensor(index: int, name: str, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    if name.endswith("norm.weight"):
        return np.ones(shape, dtype=dtype)
    rng = np.random.default_rng([SEED, index])
    out = np.empty(shape, dtype=dtype)
    # In slices along the first axis, so an expert stack never needs an f32 copy.
    flat = out.reshape(shape[0], -1)
    for i in range(0, shape[0], 8):
        block = rng.standard_normal(flat[i : i + 8].shape, dtype=np.float32)
        flat[i : i + 8] = block * INIT_STD
    return out


def parameter_counts(specs) -> tuple[int, int]:
    """(total, active per token): active drops the unused routed experts and the
    embedding table (a token reads one row), as anymoe's CountParameters does."""
    total = active = 0
    for name, shape, _ in specs:
        n = int(np.prod(shape))
        total += n
        if "_exps." in name:
            active += n * EXPERTS_USED // EXPERTS
        elif name != "token_embd.weight":
            active += n
    return total, active


def check_against_manifest(keys: dict[str, str], specs, arch: str = ARCH) -> None:
    """Every key and per-layer tensor name must be one the real converter writes for `arch`."""
    files = json.loads(MANIFEST.read_text())["files"]
    ref = next(f for f in files if f["architecture"] == arch)
    types = ref["metadata_types"]
    for key, kind in keys.items():
        if key not in types:
            raise SystemExit(f"metadata key {key} is not written by llama.cpp's converter")
        if types[key] != kind:
            raise SystemExit(f"metadata key {key}: converter writes {types[key]}, we write {kind}")
    ref_names = {re.sub(r"^blk\.\d+\.", "blk.N.", t["name"]) for t in ref["tensors"]}
    for name, _, _ in specs:
        if re.sub(r"^blk\.\d+\.", "blk.N.", name) not in ref_names:
            raise SystemExit(f"tensor {name} is not a name llama.cpp's converter writes for {arch}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(REPO_ROOT / "models" / "bench" / "glm45air-mini-f16.gguf"))
    args = ap.parse_args()

    specs = tensor_specs()
    total, active = parameter_counts(specs)
    print(f"parameters: {total:,} total ({total / 1e6:.1f}M), {active:,} active per token "
          f"({active / 1e6:.1f}M)")

    print("training the 32000-token byte-level BPE on the Python standard library ...")
    tokens, token_types, merges = train_tokenizer()
    print(f"tokenizer: {len(tokens)} tokens, {len(merges)} merges")

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(out, ARCH)
    k = f"{ARCH}."
    expert_params = 3 * HIDDEN * EXPERT_FFN
    keys = {}  # key -> GGUF type, checked against the converter's

    def put(key: str, kind: str, value) -> None:
        keys[key] = kind
        {"STRING": w.add_string, "UINT32": w.add_uint32, "FLOAT32": w.add_float32,
         "BOOL": w.add_bool}[kind](key, value)

    keys["general.architecture"] = "STRING"  # written by GGUFWriter itself
    put("general.type", "STRING", "model")
    put("general.name", "STRING", "GLM-4.5-Air-mini (random weights, benchmark only)")
    put("general.size_label", "STRING",
        gguf.size_label(total, total - EXPERTS * LAYERS * expert_params, expert_params * LAYERS, EXPERTS))
    put(k + "block_count", "UINT32", LAYERS)
    put(k + "context_length", "UINT32", CONTEXT)
    put(k + "embedding_length", "UINT32", HIDDEN)
    put(k + "feed_forward_length", "UINT32", DENSE_FFN)
    put(k + "attention.head_count", "UINT32", HEADS)
    put(k + "attention.head_count_kv", "UINT32", KV_HEADS)
    put(k + "rope.freq_base", "FLOAT32", ROPE_THETA)
    put(k + "attention.layer_norm_rms_epsilon", "FLOAT32", RMS_EPS)
    put(k + "expert_count", "UINT32", EXPERTS)
    put(k + "expert_used_count", "UINT32", EXPERTS_USED)
    put(k + "expert_group_count", "UINT32", 1)
    put(k + "expert_group_used_count", "UINT32", 1)
    put(k + "attention.key_length", "UINT32", HEAD_DIM)
    put(k + "attention.value_length", "UINT32", HEAD_DIM)
    put("general.file_type", "UINT32", int(gguf.LlamaFileType.MOSTLY_F16))
    put(k + "rope.dimension_count", "UINT32", ROTARY_DIMS)
    put(k + "expert_feed_forward_length", "UINT32", EXPERT_FFN)
    put(k + "expert_shared_count", "UINT32", SHARED_FFN // EXPERT_FFN)
    put(k + "leading_dense_block_count", "UINT32", 0)
    put(k + "expert_gating_func", "UINT32", int(gguf.ExpertGatingFuncType.SIGMOID))
    put(k + "expert_weights_scale", "FLOAT32", 1.0)
    put(k + "expert_weights_norm", "BOOL", True)
    put(k + "nextn_predict_layers", "UINT32", 0)
    put("general.quantization_version", "UINT32", gguf.GGML_QUANT_VERSION)
    put("tokenizer.ggml.model", "STRING", "gpt2")
    put("tokenizer.ggml.pre", "STRING", "gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(token_types)
    w.add_token_merges(merges)
    put("tokenizer.ggml.bos_token_id", "UINT32", tokens.index("<|endoftext|>"))
    put("tokenizer.ggml.eos_token_id", "UINT32", tokens.index("<|endoftext|>"))
    put("tokenizer.chat_template", "STRING", CHATML_TEMPLATE)
    check_against_manifest(keys, specs)

    for name, shape, dtype in specs:
        w.add_tensor_info(name, shape, np.dtype(dtype), int(np.prod(shape)) * np.dtype(dtype).itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for i, (name, shape, dtype) in enumerate(specs):
        w.write_tensor_data(make_tensor(i, name, shape, dtype))
        print(f"\rwrote {i + 1}/{len(specs)} tensors", end="", flush=True)
    w.close()
    print(f"\n{out}: {out.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
