#!/usr/bin/env python3
"""Checks a GGUF written by `anymoe prune` against its input with the `gguf` package alone.

Every metadata key equals the input's but ARCH.expert_count (the kept count); every tensor
of the input's trunk is there with the same type; tensors without experts are byte-equal;
per MoE layer the per-expert tensors (ffn_{gate,up,down}_exps, ffn_gate_inp, exp_probs_b)
hold, in ascending order, the slices of one same set of the input's experts (found by
matching the router rows), and that set is printed. Exit 1 on any difference.

Usage: /work/venv-ref/bin/python tools/check_pruned_gguf.py IN.gguf OUT.gguf
"""

from __future__ import annotations

import sys

import numpy as np
import gguf

PER_EXPERT = ("ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight",
              "ffn_gate_up_exps.weight", "ffn_gate_inp.weight", "exp_probs_b.bias")


def field_value(f):
    if f.types[0] == gguf.GGUFValueType.ARRAY:
        return [bytes(f.parts[i]) for i in f.data]
    return bytes(f.parts[f.data[0]])


def rows(t) -> np.ndarray:
    """The tensor's bytes, one row per expert (the outermost dimension)."""
    n = int(t.shape[-1])  # gguf lists ne fastest first: the expert count is last
    return np.frombuffer(t.data.tobytes(), dtype=np.uint8).reshape(n, -1)


def main() -> int:
    a, b = gguf.GGUFReader(sys.argv[1]), gguf.GGUFReader(sys.argv[2])
    arch = field_value(a.fields["general.architecture"]).decode()
    errors = []
    for k, f in a.fields.items():
        if k.startswith("GGUF.") or k in (f"{arch}.expert_count", f"{arch}.block_count",
                                          f"{arch}.nextn_predict_layers"):
            continue
        if k not in b.fields or field_value(b.fields[k]) != field_value(f):
            errors.append(f"metadata {k} differs")
    kept_count = int(b.fields[f"{arch}.expert_count"].parts[-1][0])
    total = int(a.fields[f"{arch}.expert_count"].parts[-1][0])
    tb = {t.name: t for t in b.tensors}
    kept = {}
    for t in a.tensors:
        if t.name not in tb:
            errors.append(f"tensor {t.name} missing")
            continue
        o = tb[t.name]
        if o.tensor_type != t.tensor_type:
            errors.append(f"tensor {t.name}: type {o.tensor_type.name} != {t.tensor_type.name}")
        if not t.name.endswith(PER_EXPERT):
            if o.data.tobytes() != t.data.tobytes():
                errors.append(f"tensor {t.name} differs")
            continue
        layer = int(t.name.split(".")[1])
        src, dst = rows(t), rows(o)
        if src.shape[0] != total or dst.shape[0] != kept_count:
            errors.append(f"tensor {t.name}: {dst.shape[0]} experts of {src.shape[0]}")
            continue
        ids = []
        for r in dst:
            match = [e for e in range(total) if np.array_equal(src[e], r)]
            ids.append(match[0] if match else -1)
        if t.name.endswith("ffn_gate_inp.weight"):
            kept[layer] = ids
        elif layer in kept and ids != kept[layer]:
            errors.append(f"tensor {t.name}: experts {ids}, the router's are {kept[layer]}")
        if -1 in ids or ids != sorted(set(ids)):
            errors.append(f"tensor {t.name}: slices {ids} are not distinct ascending input experts")
    for layer, ids in sorted(kept.items()):
        print(f"layer {layer}: keeps experts {ids}")
    print(f"{len(a.tensors)} tensors checked, {total} -> {kept_count} experts per layer")
    for e in errors:
        print("ERROR:", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
