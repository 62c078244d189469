#!/usr/bin/env python3
"""Writes a random-weight GGUF shaped like GLM-4.5-Air, larger than this machine's memory.

For the "bigger than memory" measurements of expert streaming (docs/benchmarks.md):
GLM-4.5-Air's shapes (hidden 4096, 96 query / 8 KV heads of 128 with q/k/v bias,
partial RoPE on 64 dims, layer 0 dense with ffn 10944, then MoE layers of 128
routed experts of ffn 1408, top-8, one shared expert, sigmoid routing with the
selection bias, vocab 151552), with fewer layers than Air's 46 so the file lands
near --target-gib (default 30 GiB: 24 layers at Q4_0). Matrices are Q4_0 or Q8_0
blocks of zero-mean random quants with a fixed small scale, written directly (nothing is
quantised); norms are 1, router/bias/vectors f32 N(0, 0.02). Tensors are streamed
to disk chunk by chunk, so memory stays at a few hundred MB whatever the size.
The tokenizer is the 32000-token BPE of tools/gen_moe_bench_gguf.py, padded to
151552 ids with unused tokens (so llama.cpp accepts the file too). Only for speed
and memory measurements: the model computes nothing meaningful.

    tools/.venv/bin/python tools/gen_big_moe_gguf.py --out models/bench/glm45air-big-Q4_0.gguf
    # a functional check of the script and the cgroup runner, ~0.4 GB:
    tools/.venv/bin/python tools/gen_big_moe_gguf.py --type Q8_0 --layers 3 --experts 16 \
        --vocab 32000 --out /tmp/small-Q8_0.gguf
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import gguf
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_moe_bench_gguf import ARCH, CHATML_TEMPLATE, train_tokenizer  # noqa: E402

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, ROTARY = 4096, 96, 8, 128, 64
EXPERTS, USED, EXPERT_FFN, DENSE_FFN, VOCAB = 128, 8, 1408, 10944, 151552
BLOCK = {"Q4_0": (gguf.GGMLQuantizationType.Q4_0, 18, 0.008), "Q8_0": (gguf.GGMLQuantizationType.Q8_0, 34, 0.0005)}
CHUNK_BLOCKS = 1 << 22  # ~75-140 MB of blocks per write


def specs(layers: int) -> list[tuple[str, tuple[int, ...], bool]]:
    """(name, outer-first shape, quantised?) in the converter's order."""
    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    out = [("output.weight", (VOCAB, HIDDEN), True), ("token_embd.weight", (VOCAB, HIDDEN), True)]
    for b in range(layers):
        p = f"blk.{b}."
        out += [(p + "attn_norm.weight", (HIDDEN,), False)]
        if b == 0:
            out += [(p + "ffn_down.weight", (HIDDEN, DENSE_FFN), True),
                    (p + "ffn_gate.weight", (DENSE_FFN, HIDDEN), True),
                    (p + "ffn_up.weight", (DENSE_FFN, HIDDEN), True)]
        else:
            out += [(p + "ffn_down_exps.weight", (EXPERTS, HIDDEN, EXPERT_FFN), True),
                    (p + "ffn_gate_exps.weight", (EXPERTS, EXPERT_FFN, HIDDEN), True),
                    (p + "ffn_up_exps.weight", (EXPERTS, EXPERT_FFN, HIDDEN), True),
                    (p + "exp_probs_b.bias", (EXPERTS,), False),
                    (p + "ffn_gate_inp.weight", (EXPERTS, HIDDEN), False),
                    (p + "ffn_down_shexp.weight", (HIDDEN, EXPERT_FFN), True),
                    (p + "ffn_gate_shexp.weight", (EXPERT_FFN, HIDDEN), True),
                    (p + "ffn_up_shexp.weight", (EXPERT_FFN, HIDDEN), True)]
        out += [(p + "post_attention_norm.weight", (HIDDEN,), False),
                (p + "attn_k.bias", (kv,), False), (p + "attn_k.weight", (kv, HIDDEN), True),
                (p + "attn_output.weight", (HIDDEN, q), True), (p + "attn_q.bias", (q,), False),
                (p + "attn_q.weight", (q, HIDDEN), True), (p + "attn_v.bias", (kv,), False),
                (p + "attn_v.weight", (kv, HIDDEN), True)]
    out.append(("output_norm.weight", (HIDDEN,), False))
    return out


def file_bytes(layers: int, block_bytes: int) -> int:
    total = 0
    for _, shape, quant in specs(layers):
        n = int(np.prod(shape))
        total += n // 32 * block_bytes if quant else 4 * n
    return total


def write_blocks(fout, n_blocks: int, block_bytes: int, scale: float, rng: np.random.Generator) -> None:
    # Zero-mean quants: uniform bytes would make Q4_0's nibbles average -0.5
    # (and Q8_0's -0.5), so every matrix-vector product would share a common
    # term that the layers amplify until the residual stream is nearly the
    # all-ones direction, whatever the token, and every token chose the same
    # experts (a 4 GiB cache hit 100 % and read nothing). Q4_0 nibbles are
    # drawn from 1..15 (values -7..7), Q8_0 bytes from -127..127.
    d = np.frombuffer(np.float16(scale).tobytes(), dtype=np.uint8)
    for start in range(0, n_blocks, CHUNK_BLOCKS):
        n = min(CHUNK_BLOCKS, n_blocks - start)
        blocks = np.empty((n, block_bytes), dtype=np.uint8)
        blocks[:, 0:2] = d
        if block_bytes == 18:  # Q4_0: 16 bytes of two nibbles
            lo = rng.integers(1, 16, size=(n, 16), dtype=np.uint8)
            hi = rng.integers(1, 16, size=(n, 16), dtype=np.uint8)
            blocks[:, 2:] = lo | (hi << 4)
        else:  # Q8_0: 32 signed bytes
            blocks[:, 2:] = rng.integers(-127, 128, size=(n, 32), dtype=np.int8).view(np.uint8)
        blocks.tofile(fout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--type", choices=sorted(BLOCK), default="Q4_0")
    ap.add_argument("--target-gib", type=float, default=30.0, help="file size to approach")
    ap.add_argument("--layers", type=int, default=0, help="layers (0: from --target-gib)")
    ap.add_argument("--experts", type=int, default=EXPERTS, help="routed experts (functional checks)")
    ap.add_argument("--vocab", type=int, default=VOCAB, help="vocabulary (functional checks)")
    args = ap.parse_args()
    globals().update(EXPERTS=args.experts, VOCAB=max(args.vocab, 32000))
    qtype, block_bytes, scale = BLOCK[args.type]
    layers = args.layers
    if layers == 0:
        layers = 2
        while layers < 46 and file_bytes(layers + 1, block_bytes) <= args.target_gib * 2**30:
            layers += 1
    print(f"{layers} layers, {args.type}: {file_bytes(layers, block_bytes) / 2**30:.2f} GiB")

    tokens, types, merges = train_tokenizer()
    tokens += [f"<|unused_{i}|>" for i in range(VOCAB - len(tokens))]
    types += [int(gguf.TokenType.UNUSED)] * (VOCAB - len(types))

    w = gguf.GGUFWriter(args.out, ARCH)
    k = ARCH + "."
    w.add_string("general.name", f"GLM-4.5-Air-shaped, {layers} layers (random weights, benchmark only)")
    for key, value in [("block_count", layers), ("context_length", 131072), ("embedding_length", HIDDEN),
                       ("feed_forward_length", DENSE_FFN), ("attention.head_count", HEADS),
                       ("attention.head_count_kv", KV_HEADS), ("expert_count", EXPERTS),
                       ("expert_used_count", USED), ("expert_group_count", 1),
                       ("expert_group_used_count", 1), ("attention.key_length", HEAD_DIM),
                       ("attention.value_length", HEAD_DIM), ("rope.dimension_count", ROTARY),
                       ("expert_feed_forward_length", EXPERT_FFN), ("expert_shared_count", 1),
                       ("leading_dense_block_count", 1),
                       ("expert_gating_func", int(gguf.ExpertGatingFuncType.SIGMOID)),
                       ("nextn_predict_layers", 0)]:
        w.add_uint32(k + key, value)
    w.add_float32(k + "rope.freq_base", 1e6)
    w.add_float32(k + "attention.layer_norm_rms_epsilon", 1e-5)
    w.add_float32(k + "expert_weights_scale", 1.0)
    w.add_bool(k + "expert_weights_norm", True)
    w.add_uint32("general.file_type", int(gguf.LlamaFileType.MOSTLY_Q4_0 if args.type == "Q4_0"
                                          else gguf.LlamaFileType.MOSTLY_Q8_0))
    w.add_uint32("general.quantization_version", gguf.GGML_QUANT_VERSION)
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_string("tokenizer.ggml.pre", "gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_uint32("tokenizer.ggml.bos_token_id", tokens.index("<|endoftext|>"))
    w.add_uint32("tokenizer.ggml.eos_token_id", tokens.index("<|endoftext|>"))
    w.add_string("tokenizer.chat_template", CHATML_TEMPLATE)

    tensors = specs(layers)
    for name, shape, quant in tensors:
        n = int(np.prod(shape))
        if quant:
            w.add_tensor_info(name, gguf.quant_shape_to_byte_shape(shape, qtype), np.dtype(np.uint8),
                              n // 32 * block_bytes, raw_dtype=qtype)
        else:
            w.add_tensor_info(name, shape, np.dtype(np.float32), 4 * n)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    # Tensor data in chunks, as GGUFWriter.write_tensor_data lays out one array.
    fout = w.fout[0]
    rng = np.random.default_rng(4500)
    for i, (name, shape, quant) in enumerate(tensors):
        ti = w.tensors[0].pop(name)
        w.write_padding(fout, fout.tell())
        n = int(np.prod(shape))
        if quant:
            write_blocks(fout, n // 32, block_bytes, scale, rng)
        elif name.endswith("norm.weight"):
            np.ones(n, dtype=np.float32).tofile(fout)
        else:
            (rng.standard_normal(n, dtype=np.float32) * 0.02).tofile(fout)
        w.write_padding(fout, ti.nbytes)
        print(f"\rwrote {i + 1}/{len(tensors)} tensors", end="", flush=True)
    w.state = gguf.gguf_writer.WriterState.WEIGHTS
    w.close()
    print(f"\n{args.out}: {Path(args.out).stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
