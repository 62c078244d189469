#!/usr/bin/env python3
"""Golden data for anymoe's dequantisers, half conversions and GGUF reader.

The reference is the `gguf` Python package (llama.cpp's gguf-py): its numpy
quantisers/dequantisers in `gguf.quants` and its `GGUFWriter`. Outputs, all under
tests/golden/ (small: the whole set is well under 200 KB):

  dequant/<type>_blocks.npy  u8  [n_blocks, block_bytes]   raw GGUF blocks
  dequant/<type>_f32.npy     f32 [n_blocks, block_elems]   gguf.quants.dequantize()
      for q8_0, q4_0, q4_1, q5_0, q5_1, mxfp4 (blocks from gguf.quants.quantize()
      of random and extreme values, plus random bytes), the k-quants q2_k ... q6_k
      and the i-quants iq1_s ... iq4_nl (random bytes with sane, zero, subnormal
      and largest-f16 scale fields: the package has no quantiser for them), f16
      and bf16 (random and special bit patterns).
  dequant/f8_e{4m3,5m2}_{blocks,f32}.npy  all 256 FP8 bytes -> torch float8 -> f32
  dequant/f32_to_f16_{in,out}.npy   f32 -> numpy float16 (round to nearest even)
  dequant/f32_to_bf16_{in,out}.npy  f32 -> gguf BF16 quantiser bits (as i32)
  dequant/f32_to_{q8_0,q4_0}_{in,out}.npy  f32 -> gguf.quants.quantize() blocks (u8)
  gguf/tiny_v3.gguf          a small GGUF written by gguf.GGUFWriter; the values
                             are asserted in tests/formats/gguf_golden_test.cc.

Run (repo root): tools/.venv/bin/python tools/gen_dequant_golden.py
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFWriter, GGUFValueType
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

REPO_ROOT = Path(__file__).resolve().parent.parent
GOLDEN = REPO_ROOT / "tests" / "golden"
rng = np.random.default_rng(20240607)


def random_f16_scales(n: int, lo: float, hi: float) -> np.ndarray:
    """n finite, nonzero f16 values with magnitude in [lo, hi) and random sign."""
    mag = np.exp(rng.uniform(np.log(lo), np.log(hi), n)).astype(np.float16)
    sign = np.where(rng.random(n) < 0.5, -1, 1).astype(np.float16)
    return (mag * sign).astype(np.float16)


def set_f16(blocks: np.ndarray, byte_offset: int, values: np.ndarray) -> None:
    blocks[:, byte_offset:byte_offset + 2] = values.astype("<f2").view(np.uint8).reshape(-1, 2)


def random_blocks(qtype: Q, n: int) -> np.ndarray:
    _, block_bytes = GGML_QUANT_SIZES[qtype]
    return rng.integers(0, 256, size=(n, block_bytes), dtype=np.uint8)


# Byte offsets of the f16 scale fields in each block layout.
F16_FIELDS = {
    Q.Q8_0: [0], Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2],
    Q.Q2_K: [80, 82], Q.Q3_K: [108], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208],
    Q.IQ1_S: [0], Q.IQ2_XXS: [0], Q.IQ2_XS: [0], Q.IQ2_S: [0], Q.IQ3_XXS: [0],
    Q.IQ3_S: [0], Q.IQ4_XS: [0], Q.IQ4_NL: [0],
    Q.IQ1_M: [], Q.MXFP4: [],  # d split over 4 nibbles / an e8m0 byte: set_scale below
}
QUANTIZABLE = (Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.MXFP4)


def set_iq1m_scale(blocks: np.ndarray, values: np.ndarray) -> None:
    """IQ1_M keeps its f16 d in the top nibbles of the 4 u16 at bytes 48..55."""
    bits = values.astype("<f2").view(np.uint16).astype(np.uint16)
    sc = blocks[:, 48:56].copy().view("<u2")
    for i in range(4):
        nibble = (bits >> np.uint16(4 * i)) & np.uint16(0xF)
        sc[:, i] = (sc[:, i] & np.uint16(0x0FFF)) | (nibble << np.uint16(12))
    blocks[:, 48:56] = sc.view(np.uint8)


def set_scale(blocks: np.ndarray, qtype: Q, values) -> None:
    """Sets every scale field of `blocks` to values() (called once per field)."""
    if qtype == Q.IQ1_M:
        set_iq1m_scale(blocks, values())
    elif qtype == Q.MXFP4:  # e8m0: edges of the exponent range instead
        blocks[:, 0] = rng.choice(np.array([0, 1, 2, 127, 253, 254, 255], np.uint8), len(blocks))
    for off in F16_FIELDS[qtype]:
        set_f16(blocks, off, values())


def extreme_values(block_elems: int) -> np.ndarray:
    """Rows of extreme f32 inputs for the quantisers: huge, tiny, constant, one spike."""
    rows = [np.full(block_elems, 6.0e4, np.float32), np.full(block_elems, -1e-7, np.float32),
            np.zeros(block_elems, np.float32),
            np.where(np.arange(block_elems) == 3, 6.0e4, 1e-3).astype(np.float32),
            (rng.standard_normal(block_elems) * 1e-6).astype(np.float32)]
    return np.stack(rows)


def quant_blocks(qtype: Q) -> np.ndarray:
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    blocks = []
    if qtype in QUANTIZABLE:  # the package can quantise these
        x = rng.standard_normal((4, block_elems)).astype(np.float32) * np.float32(3.0)
        with np.errstate(all="ignore"):
            blocks.append(quantize(x, qtype).reshape(-1, block_bytes))
            if qtype not in (Q.Q8_0, Q.Q4_0, Q.Q4_1):  # keep the older goldens as they were
                blocks.append(quantize(extreme_values(block_elems), qtype).reshape(-1, block_bytes))
    raw = random_blocks(qtype, 8)
    set_scale(raw, qtype, lambda: random_f16_scales(len(raw), 1e-4, 4.0))
    # Edge scales: zero, a subnormal, the largest finite f16.
    edge = random_blocks(qtype, 3)
    set_scale(edge, qtype, lambda: np.array([0.0, 5.96e-8, 65504.0], dtype=np.float16))
    blocks += [raw, edge]
    if qtype not in (Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q4_K, Q.Q5_K, Q.Q6_K):
        blocks.append(random_blocks(qtype, 4))  # fully random bytes: inf / NaN scales too
    return np.concatenate(blocks)


def half_bits(special: list[int], n_random: int) -> np.ndarray:
    bits = np.concatenate([np.array(special, dtype=np.uint16),
                           rng.integers(0, 1 << 16, size=n_random, dtype=np.uint16)])
    return bits.view(np.uint8).reshape(-1, 2)


F16_SPECIAL = [0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x7bff, 0xfbff,
               0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01, 0x7fff]
BF16_SPECIAL = [0x0000, 0x8000, 0x0001, 0x007f, 0x0080, 0x3f80, 0xbf80, 0x7f7f, 0xff7f,
                0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7f81, 0x7fff]


NEW_TYPES = {
    "q2_k": Q.Q2_K, "q3_k": Q.Q3_K, "q5_0": Q.Q5_0, "q5_1": Q.Q5_1, "iq1_s": Q.IQ1_S,
    "iq1_m": Q.IQ1_M, "iq2_xxs": Q.IQ2_XXS, "iq2_xs": Q.IQ2_XS, "iq2_s": Q.IQ2_S,
    "iq3_xxs": Q.IQ3_XXS, "iq3_s": Q.IQ3_S, "iq4_xs": Q.IQ4_XS, "iq4_nl": Q.IQ4_NL,
    "mxfp4": Q.MXFP4,
}


def write_fp8(out: Path) -> None:
    """Every FP8 byte through torch's float8 -> float32 conversion."""
    import torch

    all_bytes = np.arange(256, dtype=np.uint8)
    for name, dtype in (("f8_e4m3", torch.float8_e4m3fn), ("f8_e5m2", torch.float8_e5m2)):
        f32 = torch.from_numpy(all_bytes.copy()).view(dtype).to(torch.float32).numpy()
        np.save(out / f"{name}_blocks.npy", all_bytes.reshape(256, 1))
        np.save(out / f"{name}_f32.npy", f32.astype(np.float32).reshape(256, 1))


def write_dequant(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    cases = {
        "q8_0": (Q.Q8_0, quant_blocks(Q.Q8_0)),
        "q4_0": (Q.Q4_0, quant_blocks(Q.Q4_0)),
        "q4_1": (Q.Q4_1, quant_blocks(Q.Q4_1)),
        "q4_k": (Q.Q4_K, quant_blocks(Q.Q4_K)),
        "q5_k": (Q.Q5_K, quant_blocks(Q.Q5_K)),
        "q6_k": (Q.Q6_K, quant_blocks(Q.Q6_K)),
        "f16": (Q.F16, half_bits(F16_SPECIAL, 1008)),
        "bf16": (Q.BF16, half_bits(BF16_SPECIAL, 1009)),
    }
    write_cases(out, cases)
    write_half_rounding(out)
    # Generated last, so that the older files above keep their random draws.
    write_cases(out, {name: (q, quant_blocks(q)) for name, q in NEW_TYPES.items()})
    write_fp8(out)


def write_cases(out: Path, cases: dict) -> None:
    for name, (qtype, blocks) in cases.items():
        with np.errstate(all="ignore"):
            f32 = dequantize(blocks.reshape(-1), qtype).astype(np.float32, copy=False)
        block_elems = GGML_QUANT_SIZES[qtype][0]
        np.save(out / f"{name}_blocks.npy", np.ascontiguousarray(blocks, dtype=np.uint8))
        np.save(out / f"{name}_f32.npy", np.ascontiguousarray(f32.reshape(len(blocks), block_elems)))


def write_half_rounding(out: Path) -> None:
    # f32 -> f16 / bf16 rounding, including exact halfway cases and range edges.
    specials = np.array([0.0, -0.0, 1.0, -1.0, 65504.0, 65519.996, 65520.0, 1e10, -1e10,
                         6.1035156e-05, 5.96e-08, 2.98e-08, 2.99e-08, 1e-10, np.inf, -np.inf,
                         np.nan, 3.4028235e38, 1.17549435e-38, 1e-45], dtype=np.float32)
    halfway = (np.uint32(0x3f800000) + (np.arange(0, 400, dtype=np.uint32) << 12)).view(np.float32)
    rand = (rng.standard_normal(1024) * np.exp(rng.uniform(-20, 12, 1024))).astype(np.float32)
    x = np.concatenate([specials, halfway, rand]).astype(np.float32)
    with np.errstate(all="ignore"):
        np.save(out / "f32_to_f16_in.npy", x)
        np.save(out / "f32_to_f16_out.npy", x.astype(np.float16))
        bf16 = quantize(x, Q.BF16).view(np.uint16).astype(np.int32)
    np.save(out / "f32_to_bf16_in.npy", x)
    np.save(out / "f32_to_bf16_out.npy", bf16)


def write_row_quantizers(out: Path) -> None:
    # f32 -> q8_0 / q4_0 blocks (what a quantised KV cache stores), its own
    # generator so the other files do not change: ties of the rounding (values
    # at k + 0.5 steps), zero and constant blocks, a lone outlier, random rows.
    r = np.random.default_rng(20261201)
    n = 32 * 64
    x = (r.standard_normal(n) * np.exp(r.uniform(-8, 8, n // 32)).repeat(32)).astype(np.float32)
    x[:32] = 0.0
    x[32:64] = -3.0
    x[64:96] = (np.arange(32, dtype=np.float32) - 16.0) * 0.5  # halves: rounding ties
    x[96:128] = 1e-3
    x[100] = -250.0
    x[128:160] = np.linspace(-127, 127, 32, dtype=np.float32)
    for name, qtype in [("q8_0", Q.Q8_0), ("q4_0", Q.Q4_0)]:
        np.save(out / f"f32_to_{name}_in.npy", x)
        np.save(out / f"f32_to_{name}_out.npy", quantize(x.reshape(-1, 32), qtype))


def write_tiny_gguf(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    w = GGUFWriter(str(path), arch="tinytest")
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 0.15625)
    w.add_uint64("test.u64", 18000000000000000000)
    w.add_int64("test.i64", -9000000000000000000)
    w.add_float64("test.f64", 2.718281828459045)
    w.add_bool("test.bool", True)
    w.add_string("test.string", "h\u00e9llo \u4e16\u754c")
    w.add_array("test.strings", ["a", "", "\u00fcber"])
    w.add_array("test.i32s", [1, -2, 3])
    w.add_array("test.f32s", [0.5, -1.25])
    w.add_key_value("test.u8s", [1, 2, 255], GGUFValueType.ARRAY, sub_type=GGUFValueType.UINT8)
    w.add_custom_alignment(64)
    f32 = np.arange(6, dtype=np.float32).reshape(2, 3)
    f16 = (np.arange(8, dtype=np.float32) / 4).astype(np.float16)
    q8 = (np.arange(64, dtype=np.float32) - 32) / 8
    w.add_tensor("t.f32", f32)
    w.add_tensor("t.f16", f16)
    w.add_tensor("t.q8_0", quantize(q8.reshape(2, 32), Q.Q8_0), raw_dtype=Q.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> None:
    write_dequant(GOLDEN / "dequant")
    write_row_quantizers(GOLDEN / "dequant")
    write_tiny_gguf(GOLDEN / "gguf" / "tiny_v3.gguf")
    (GOLDEN / "dequant" / "README.md").write_text(
        "Generated by tools/gen_dequant_golden.py with "
        f"gguf=={version('gguf')} numpy=={version('numpy')} torch=={version('torch')}; "
        "do not edit by hand.\n")
    (GOLDEN / "gguf" / "README.md").write_text(
        "tiny_v3.gguf: written by gguf.GGUFWriter (tools/gen_dequant_golden.py, "
        f"gguf=={version('gguf')}); expected values in tests/formats/gguf_golden_test.cc.\n")


if __name__ == "__main__":
    main()
