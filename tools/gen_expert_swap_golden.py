#!/usr/bin/env python3
"""Goldens for the live expert swap (POST /admin/experts, docs/server.md).

From tests/golden/moe_gguf/mixtral.gguf (A) this writes, into
tests/golden/expert_swap/:

- upload_l1_e3e5.gguf: new f32 weights for experts 3 and 5 of layer 1, in the
  upload layout (blk.1.ffn_{gate,up,down}_exps.weight stacked over the two
  experts, [2, ffn, hidden] / [2, hidden, ffn]), written by the `gguf` package;
- mixtral_l1_e3e5.gguf: A with exactly those bytes of those experts replaced
  (every other byte of A unchanged): the file whose outputs a server on A must
  reproduce, bitwise, once the upload is applied;
- hostile uploads, each refused with the code in its name:
  bad_shape (ffn 31), bad_dtype (f16), non_finite (one NaN), extra_tensor
  (an attention weight beside the experts), missing_tensor (no down_exps).
  (Truncated files are cut by the test itself from the good upload.)

Run from the repo root: /work/venv-ref/bin/python tools/gen_expert_swap_golden.py
(numpy + gguf; deterministic: seed 52).
"""
import pathlib

import gguf
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "tests/golden/moe_gguf/mixtral.gguf"
OUT = ROOT / "tests/golden/expert_swap"
LAYER = 1
EXPERTS = [3, 5]
PARTS = ["gate", "up", "down"]


def write_upload(path, tensors):
    w = gguf.GGUFWriter(str(path), arch="expert-upload")
    for name, array in tensors.items():
        w.add_tensor(name, array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    reader = gguf.GGUFReader(str(SRC))
    src_bytes = bytearray(SRC.read_bytes())
    rng = np.random.default_rng(52)
    upload = {}
    for part in PARTS:
        name = f"blk.{LAYER}.ffn_{part}_exps.weight"
        t = next(t for t in reader.tensors if t.name == name)
        assert t.tensor_type == gguf.GGMLQuantizationType.F32, t.tensor_type
        stacked = np.asarray(t.data)  # [E, rows, cols], outer-first
        # The reader's offset is where the tensor's bytes start in the file.
        assert bytes(src_bytes[t.data_offset:t.data_offset + t.n_bytes]) == stacked.tobytes()
        scale = float(stacked.std())
        new = (rng.standard_normal((len(EXPERTS),) + stacked.shape[1:]) * scale).astype(np.float32)
        upload[name] = new
        per_expert = stacked[0].nbytes
        for i, e in enumerate(EXPERTS):
            at = t.data_offset + e * per_expert
            src_bytes[at:at + per_expert] = new[i].tobytes()
    (OUT / "mixtral_l1_e3e5.gguf").write_bytes(bytes(src_bytes))
    write_upload(OUT / "upload_l1_e3e5.gguf", upload)

    gate = f"blk.{LAYER}.ffn_gate_exps.weight"
    bad = dict(upload)
    bad[gate] = upload[gate][:, :-1, :].copy()
    write_upload(OUT / "bad_shape.gguf", bad)
    bad = {k: v.astype(np.float16) for k, v in upload.items()}
    write_upload(OUT / "bad_dtype.gguf", bad)
    bad = {k: v.copy() for k, v in upload.items()}
    bad[f"blk.{LAYER}.ffn_down_exps.weight"][1, 7, 3] = np.nan
    write_upload(OUT / "non_finite.gguf", bad)
    bad = dict(upload)
    bad[f"blk.{LAYER}.attn_q.weight"] = np.zeros((64, 64), np.float32)
    write_upload(OUT / "extra_tensor.gguf", bad)
    bad = {k: v for k, v in upload.items() if "down" not in k}
    write_upload(OUT / "missing_tensor.gguf", bad)
    for p in sorted(OUT.glob("*.gguf")):
        print(p.relative_to(ROOT), p.stat().st_size)


if __name__ == "__main__":
    main()
