#!/usr/bin/env python3
"""A runnable MoE-fied SmolLM2-135M (Mixtral-style GGUF), for expert-pruning quality studies.

tools/gen_moefied_routing_traces.py splits each layer's 1536 FFN neurons of the trained
dense SmolLM2-135M into 128 experts of 12 by its balanced k-means over the gate rows
(MoEfication, Zhang et al. 2022; same seed, so the same experts) and routes each token
to the 8 whose neurons fire hardest. That router is no linear layer, so this file gives
the model one an engine can run: a linear router fitted by least squares, per layer,
to predict each expert's activation norm ||silu(G_e x) * (U_e x)|| from the FFN's
input x, on calibration text the pruning study does not use (MPL-2.0, GFDL-1.3, LGPL-2.1
and 14 Python standard-library modules, 512 tokens each, ridge-regularised; the study profiles GPL-3 and scores Apache-2.0).
Its logits are scaled to spread by 0.01, so that Mixtral's routing (softmax over the
experts, top-k renormalised) ranks experts by the predicted norm and gives each chosen
expert a weight within about 1 % of 1/k; every expert's down projection is multiplied
by k, so the chosen experts' neurons add up as the dense FFN's do. With all 128 experts
chosen it is the dense model up to those weights. The routing is learnt from the
trained model's activations on real text, but the experts were never trained to be
experts: the model is worse than the dense one, and its own perplexity is the base the
pruning study compares against.

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
LOGIT_SPREAD = 0.01
CALIBRATION_TOKENS = 512
RIDGE = 1e-2  # of the inputs' mean square: the fit has 576 weights per expert


def CALIBRATION(lic: Path, std: Path) -> list[Path]:
    """Texts the pruning study neither profiles (GPL-3) nor scores (Apache-2.0)."""
    mods = ["argparse.py", "textwrap.py", "json/decoder.py", "collections/__init__.py",
            "subprocess.py", "typing.py", "pathlib.py", "logging/__init__.py", "email/message.py",
            "http/client.py", "unittest/case.py", "dataclasses.py", "inspect.py", "shutil.py"]
    return [lic / "MPL-2.0", lic / "GFDL-1.3", lic / "LGPL-2.1"] + [std / m for m in mods]


def calibration(model_path: Path) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per layer, the FFN inputs [N, 576] and activations [N, 1536] on the calibration text."""
    import sysconfig

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_path.parent, gguf_file=model_path.name)
    model = AutoModelForCausalLM.from_pretrained(model_path.parent, gguf_file=model_path.name,
                                                 dtype=torch.float32)
    model.eval()
    lic, std = Path("/usr/share/common-licenses"), Path(sysconfig.get_paths()["stdlib"])
    layers = model.model.layers
    xs = [[] for _ in layers]
    acts = [[] for _ in layers]
    hooks = []
    for i, l in enumerate(layers):
        hooks.append(l.mlp.register_forward_pre_hook(lambda m, a, i=i: xs[i].append(a[0][0].numpy())))
        hooks.append(l.mlp.down_proj.register_forward_pre_hook(
            lambda m, a, i=i: acts[i].append(a[0][0].numpy())))
    for p in CALIBRATION(lic, std):
        ids = tok(p.read_text(encoding="utf-8", errors="replace"), return_tensors="pt").input_ids
        with torch.no_grad():
            model(ids[:, :CALIBRATION_TOKENS])
    for h in hooks:
        h.remove()
    return [np.concatenate(x).astype(np.float64) for x in xs], [np.concatenate(a) for a in acts]


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
    ap.add_argument("--top-k", type=int, default=TOP_K, help="experts per token (default: the traces')")
    args = ap.parse_args()
    top_k = args.top_k
    r = gguf.GGUFReader(args.model)
    tensors = {t.name: t for t in r.tensors}
    n_layers = int(r.fields["llama.block_count"].parts[-1][0])
    w = gguf.GGUFWriter(args.out, "llama")
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        copy_field(w, field)
    w.add_uint32("llama.expert_count", EXPERTS)
    w.add_uint32("llama.expert_used_count", top_k)
    rng = np.random.default_rng(SEED)  # the traces tool's: the same experts
    xs, acts = calibration(Path(args.model))
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
        norms = np.linalg.norm(acts[layer][:, groups], axis=2).astype(np.float64)  # [N, 128]
        # No constant term: a router has no bias (and experts are ranked against each other).
        x = xs[layer]
        gram = x.T @ x
        gram += np.eye(gram.shape[0]) * RIDGE * np.trace(gram) / gram.shape[0]
        fit = np.linalg.solve(gram, x.T @ norms)  # [576, 128], ridge least squares
        predicted = x @ fit
        router = (fit.T * (LOGIT_SPREAD / predicted.std())).astype(np.float32)  # [128, 576]
        w.add_tensor(f"blk.{layer}.ffn_gate_inp.weight", router)
        w.add_tensor(f"blk.{layer}.ffn_gate_exps.weight", gate[groups].astype(np.float32))
        w.add_tensor(f"blk.{layer}.ffn_up_exps.weight", up[groups].astype(np.float32))
        w.add_tensor(f"blk.{layer}.ffn_down_exps.weight",
                     (down[:, groups].transpose(1, 0, 2) * top_k).astype(np.float32))
    w.add_uint32("llama.expert_feed_forward_length", int(groups.shape[1]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {args.out}: {n_layers} layers x {EXPERTS} experts of {groups.shape[1]}, top-{top_k}")


if __name__ == "__main__":
    main()
