#!/usr/bin/env python3
"""A runnable MoE-fied SmolLM2-135M (Mixtral-style GGUF), for expert-pruning quality studies.

tools/gen_moefied_routing_traces.py splits each layer's 1536 FFN neurons of the trained
dense SmolLM2-135M into 128 experts of 12 by its balanced k-means over the gate rows
(MoEfication, Zhang et al. 2022; same seed, so the same experts) and routes each token
to the 8 whose neurons fire hardest. That router is no linear layer, so this file gives
the model one an engine can run: expert e's router row is the centroid of its neurons'
normalised gate rows (the parameter-clustering centre, so the logit says how well the
token aligns with the expert's neurons), scaled so that the logits spread by about 0.1
(softmax over the experts, top 8 renormalised, as Mixtral routes, then gives each chosen
expert a weight of about 1/8), and every expert's down projection is multiplied by 8,
so that the chosen experts' neurons add up as the dense FFN's do. The routing is
derived from trained weights and real activations; it is not trained, and the model is
not as good as the dense one (its perplexity is the base the pruning study compares
against).

Every other tensor and key is copied from the dense file; experts are f32 [128, 12, 576]
/ [128, 576, 12]. Run from the repo root (needs models/SmolLM2-135M-Instruct.Q4_1.gguf:
scripts/fetch-default-model.sh), about 30 s:

    tools/.venv/bin/python tools/gen_moefied_gguf.py --out /tmp/smollm2-moefied.gguf
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import gguf

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_moefied_routing_traces import EXPERTS, SEED, TOP_K, balanced_kmeans  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
LOGIT_SPREAD = 0.1


def copy_field(w: gguf.GGUFWriter, field) -> None:
    """One metadata key as the reader found it."""
    vtype = field.types[0]
    if vtype == gguf.GGUFValueType.ARRAY:
        etype = field.types[1]
        if etype == gguf.GGUFValueType.STRING:
            items = [bytes(field.parts[i]).decode("utf-8") for i in field.data]
        else:
            items = [field.parts[i].tolist()[0] for i in field.data]
        w.add_key_value(field.name, items, vtype, sub_type=etype)
    elif vtype == gguf.GGUFValueType.STRING:
        w.add_key_value(field.name, bytes(field.parts[field.data[0]]).decode("utf-8"), vtype)
    else:
        w.add_key_value(field.name, field.parts[field.data[0]].tolist()[0], vtype)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    r = gguf.GGUFReader(args.model)
    tensors = {t.name: t for t in r.tensors}
    n_layers = int(r.fields["llama.block_count"].parts[-1][0])
    w = gguf.GGUFWriter(args.out, "llama")
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        copy_field(w, field)
    w.add_uint32("llama.expert_count", EXPERTS)
    w.add_uint32("llama.expert_used_count", TOP_K)
    rng = np.random.default_rng(SEED)  # the traces tool's: the same experts
    for t in r.tensors:
        if ".ffn_gate." in t.name or ".ffn_up." in t.name or ".ffn_down." in t.name:
            continue
        w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
        if not t.name.endswith(".ffn_norm.weight"):
            continue
        layer = int(t.name.split(".")[1])
        deq = lambda n: gguf.quants.dequantize(tensors[f"blk.{layer}.{n}.weight"].data,
                                               tensors[f"blk.{layer}.{n}.weight"].tensor_type)
        gate, up, down = deq("ffn_gate"), deq("ffn_up"), deq("ffn_down")  # [1536,576] x2, [576,1536]
        labels = balanced_kmeans(gate, EXPERTS, rng)
        groups = np.stack([np.flatnonzero(labels == e) for e in range(EXPERTS)])  # [128, 12]
        unit = gate / np.linalg.norm(gate, axis=1, keepdims=True)
        centres = unit[groups].mean(axis=1)
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)  # [128, 576]
        # A normed row is norm_weight * (unit-variance values): its logit's spread.
        norm_w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64)
        spread = np.median(np.linalg.norm(centres * norm_w, axis=1))
        router = (centres * (LOGIT_SPREAD / spread)).astype(np.float32)
        w.add_tensor(f"blk.{layer}.ffn_gate_inp.weight", router)
        w.add_tensor(f"blk.{layer}.ffn_gate_exps.weight", gate[groups].astype(np.float32))
        w.add_tensor(f"blk.{layer}.ffn_up_exps.weight", up[groups].astype(np.float32))
        w.add_tensor(f"blk.{layer}.ffn_down_exps.weight",
                     (down[:, groups].transpose(1, 0, 2) * TOP_K).astype(np.float32))
    w.add_uint32("llama.expert_feed_forward_length", int(groups.shape[1]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {args.out}: {n_layers} layers x {EXPERTS} experts of {groups.shape[1]}, top-{TOP_K}")


if __name__ == "__main__":
    main()
