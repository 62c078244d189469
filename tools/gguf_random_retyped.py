#!/usr/bin/env python3
"""Copies a GGUF with its quantised matrices retyped to another GGUF type, random weights.

For decode-speed checks of weight types the repository cannot quantise to (the
codebook i-quants): keeps the source's metadata and tokenizer, and writes every
quantised tensor whose rows are a whole number of the new type's blocks (on
SmolLM2, whose width 576 is no multiple of 256, the ffn_down matrices, as
llama-quantize leaves it too) as valid random blocks of TYPE: random quants,
a fixed small f16 scale. The rest is copied. Only for speed: the model
computes nothing.

    /work/venv-ref/bin/python tools/gguf_random_retyped.py models/X.Q4_1.gguf IQ2_XS /tmp/X.iq2_xs.gguf
"""

from __future__ import annotations

import argparse
from pathlib import Path

import gguf
import numpy as np

# Byte offsets of each block's f16 scale (ggml-common.h) and its value; iq1_m
# keeps its f16 in the top nibbles of its 4 scale words at 48..55.
SCALES = {
    "IQ2_XXS": [(0, 0.003)], "IQ2_XS": [(0, 0.003)], "IQ2_S": [(0, 0.003)],
    "IQ3_XXS": [(0, 0.003)], "IQ3_S": [(0, 0.001)], "IQ1_S": [(0, 0.002)],
    "IQ4_XS": [(0, 0.0005)], "Q2_K": [(80, 0.001), (82, 0.001)], "Q3_K": [(108, 0.0005)],
    "Q4_K": [(0, 0.0001), (2, 0.0001)], "Q5_K": [(0, 0.00005), (2, 0.00005)],
    "Q6_K": [(208, 0.00002)], "IQ1_M": [],
}


def random_blocks(qtype: gguf.GGMLQuantizationType, n_blocks: int, rng) -> np.ndarray:
    _, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)
    for offset, value in SCALES[qtype.name]:
        blocks[:, offset:offset + 2] = np.frombuffer(np.float16(value).tobytes(), np.uint8)
    if qtype.name == "IQ1_M":
        d = int(np.frombuffer(np.float16(0.002).tobytes(), np.uint16)[0])
        for i in range(4):
            top = 48 + 2 * i + 1
            blocks[:, top] = (blocks[:, top] & 0x0F) | (((d >> (4 * i)) & 0x0F) << 4)
    return blocks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("type", choices=sorted(SCALES))
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    qtype = gguf.GGMLQuantizationType[args.type]
    block_elems, _ = gguf.GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(args.seed)
    reader = gguf.GGUFReader(args.src)
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(args.out, arch)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        val_type = field.types[0]
        sub_type = field.types[-1] if val_type == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), val_type, sub_type=sub_type)
    data, retyped = [], 0
    for t in reader.tensors:
        shape = [int(x) for x in reversed(t.shape)]  # outer first
        quantised = t.tensor_type not in (gguf.GGMLQuantizationType.F32,
                                          gguf.GGMLQuantizationType.F16)
        if quantised and len(shape) == 2 and shape[-1] % block_elems == 0:
            byte_shape = gguf.quant_shape_to_byte_shape(shape, qtype)
            blocks = random_blocks(qtype, shape[0] * shape[1] // block_elems, rng)
            arr = blocks.reshape(byte_shape)
            writer.add_tensor_info(t.name, arr.shape, arr.dtype, arr.nbytes, qtype)
            data.append(arr)
            retyped += 1
        else:
            writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
            data.append(t.data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for arr in data:
        writer.write_tensor_data(arr)
    writer.close()
    print(f"{args.out}: {retyped} of {len(reader.tensors)} tensors as {args.type} (random)")


if __name__ == "__main__":
    main()
