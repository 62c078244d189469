#!/usr/bin/env python3
"""Rebuilds a GGUF's shape with random weights where the file itself cannot go.

A benchmark file (SmolLM2 at 92-145 MB, the MoE bench file at 520 MB) is larger
than what can travel to a machine that reaches no registry (the device tool
sends 64 MiB). Speed depends on the tensors' shapes and types, not on their
values, so this keeps the file's header (metadata, tokenizer, tensor table:
a few MB) and makes the data there:

    tools/gguf_random_like.py skeleton models/bench/X.gguf .gpudeps/X.skel   # here
    tools/gguf_random_like.py fill .gpudeps/X.skel /tmp/X.gguf               # there

`skeleton` needs the `gguf` package (tools/.venv); `fill` needs numpy alone.
The filled file has the source's exact bytes up to the tensor data and the same
size; each quantized block gets random quants and a fixed small scale (so the
weights look like N(0, ~0.02) and activations stay finite), norm weights are 1,
other float tensors N(0, 0.02). Only for speed: the model computes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

# ggml type id -> (name, block bytes, [(byte offset of an f16 scale, value)]).
# Offsets follow the block layouts in ggml-common.h; values keep a block's
# weights within about +-0.06.
BLOCKS = {
    2: ("Q4_0", 18, [(0, 0.008)]),
    3: ("Q4_1", 20, [(0, 0.008), (2, -0.06)]),
    6: ("Q5_0", 22, [(0, 0.004)]),
    7: ("Q5_1", 24, [(0, 0.004), (2, -0.06)]),
    8: ("Q8_0", 34, [(0, 0.0005)]),
    10: ("Q2_K", 84, [(80, 0.001), (82, 0.001)]),
    11: ("Q3_K", 110, [(108, 0.0005)]),
    12: ("Q4_K", 144, [(0, 0.0001), (2, 0.0001)]),
    13: ("Q5_K", 176, [(0, 0.00005), (2, 0.00005)]),
    14: ("Q6_K", 210, [(208, 0.00002)]),
}
F32, F16 = 0, 1


def skeleton(src: Path, out: Path) -> None:
    import gguf  # only here: the machine that runs `fill` may lack it

    reader = gguf.GGUFReader(src)
    tensors = [{"name": t.name, "type": int(t.tensor_type), "offset": int(t.data_offset),  # in the file
                "nbytes": int(t.n_bytes)} for t in reader.tensors]
    unknown = {t["type"] for t in tensors} - set(BLOCKS) - {F32, F16}
    if unknown:
        sys.exit(f"{src}: tensor types {sorted(unknown)} have no block layout here")
    with open(src, "rb") as f:
        header = f.read(reader.data_offset)
    out.write_bytes(header)
    table = {"source": src.name, "size": src.stat().st_size, "tensors": tensors}
    Path(str(out) + ".json").write_text(json.dumps(table))
    print(f"{out}: {len(header)} header bytes, {len(tensors)} tensors of {table['size']} bytes")


def tensor_data(t: dict, rng: np.random.Generator) -> bytes:
    if t["type"] == F32:
        if t["name"].endswith("norm.weight"):
            return np.ones(t["nbytes"] // 4, np.float32).tobytes()
        return (rng.standard_normal(t["nbytes"] // 4, np.float32) * 0.02).tobytes()
    if t["type"] == F16:
        return (rng.standard_normal(t["nbytes"] // 2, np.float32) * 0.02).astype(np.float16).tobytes()
    _, block_bytes, scales = BLOCKS[t["type"]]
    blocks = rng.integers(0, 256, size=(t["nbytes"] // block_bytes, block_bytes), dtype=np.uint8)
    for offset, value in scales:
        blocks[:, offset:offset + 2] = np.frombuffer(np.float16(value).tobytes(), np.uint8)
    return blocks.tobytes()


def fill(skel: Path, out: Path, seed: int) -> None:
    table = json.loads(Path(str(skel) + ".json").read_text())
    rng = np.random.default_rng(seed)
    with open(out, "wb") as f:
        f.write(skel.read_bytes())
        for t in sorted(table["tensors"], key=lambda t: t["offset"]):
            f.write(b"\0" * (t["offset"] - f.tell()))  # alignment padding, as in the source
            f.write(tensor_data(t, rng))
        f.write(b"\0" * (table["size"] - f.tell()))
    if out.stat().st_size != table["size"]:
        sys.exit(f"{out}: {out.stat().st_size} bytes written, the source has {table['size']}")
    print(f"{out}: {table['size']} bytes shaped like {table['source']} (random weights)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("skeleton", help="keep a GGUF's header and tensor table")
    s.add_argument("src", type=Path)
    s.add_argument("out", type=Path)
    f = sub.add_parser("fill", help="write a GGUF from a skeleton with random weights")
    f.add_argument("skel", type=Path)
    f.add_argument("out", type=Path)
    f.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.cmd == "skeleton":
        skeleton(args.src, args.out)
    else:
        fill(args.skel, args.out, args.seed)


if __name__ == "__main__":
    main()
