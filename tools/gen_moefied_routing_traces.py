#!/usr/bin/env python3
"""Routing traces of a real language model on real text, for measuring expert-cache policies.

The bench and golden MoE files have random weights, so their routers pick experts
almost uniformly and no cache policy can show an edge on them. No trained MoE
can be fetched here, so this derives one from the trained dense SmolLM2-135M the
project already ships, by MoEfication (Zhang et al., 2022, "MoEfication:
Transformer Feed-forward Layers are Mixtures of Experts"): each layer's 1536 FFN
neurons are split into 128 experts of 12 by balanced k-means over their
normalised gate-projection rows (the paper's parameter clustering), and each
token's experts are the top 8 by the L2 norm of their neurons' activations
silu(gate x) * (up x), the paper's ground-truth router. That is GLM-4.5-Air's
ratio (8 of 128). The tokens' activations, and so the traces' temporal and
semantic structure, come from the trained model reading real text: each of the
documents below (licence texts and Python standard-library sources shipped on
every Debian machine) is one sequence.

Writes one trace per document, int32 [tokens, 30 layers, 8] .npy, the format of
`anymoe run --routing-trace`, to replay with `anymoe cache-sim`. Run from the
repo root (needs models/SmolLM2-135M-Instruct.Q4_1.gguf: scripts/fetch-default-model.sh):

    tools/.venv/bin/python tools/gen_moefied_routing_traces.py --out traces/smollm2
"""

from __future__ import annotations

import argparse
import sysconfig
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

REPO = Path(__file__).resolve().parent.parent
EXPERTS, TOP_K, SEED = 128, 8, 22


def documents() -> list[tuple[str, str]]:
    lic = Path("/usr/share/common-licenses")
    std = Path(sysconfig.get_paths()["stdlib"])
    names = [lic / "GPL-3", lic / "Apache-2.0", lic / "MPL-2.0", lic / "GFDL-1.3",
             std / "argparse.py", std / "json" / "decoder.py", std / "textwrap.py",
             std / "collections" / "__init__.py"]
    return [(p.name, p.read_text(encoding="utf-8", errors="replace")) for p in names if p.exists()]


def balanced_kmeans(rows: np.ndarray, k: int, rng: np.random.Generator, iters: int = 20) -> np.ndarray:
    """Labels [n] in [0, k), each cluster exactly n / k rows."""
    n = rows.shape[0]
    cap = n // k
    x = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    centers = x[rng.choice(n, k, replace=False)]
    labels = np.zeros(n, dtype=np.int64)
    for _ in range(iters):
        sim = x @ centers.T  # cosine similarity [n, k]
        prefs = np.argsort(-sim, axis=1)  # each row's centers, best first
        fill = np.zeros(k, dtype=np.int64)
        # Rows that fit one center best choose first; each takes its best center with room.
        for r in np.argsort(-sim.max(axis=1)):
            for c in prefs[r]:
                if fill[c] < cap:
                    labels[r] = c
                    fill[c] += 1
                    break
        for c in range(k):
            m = x[labels == c].mean(axis=0)
            centers[c] = m / max(np.linalg.norm(m), 1e-12)
    return labels


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--out", default=str(REPO / "traces" / "smollm2"))
    ap.add_argument("--tokens", type=int, default=512, help="tokens per document")
    args = ap.parse_args()
    path = Path(args.model)
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                 dtype=torch.float32)
    model.eval()
    rng = np.random.default_rng(SEED)
    layers = model.model.layers
    groups = []  # per layer: [experts, neurons of each]
    for layer in layers:
        gate = layer.mlp.gate_proj.weight.detach().numpy()
        labels = balanced_kmeans(gate, EXPERTS, rng)
        groups.append(np.stack([np.flatnonzero(labels == e) for e in range(EXPERTS)]))
    captured: list[torch.Tensor] = []
    hooks = [l.mlp.down_proj.register_forward_pre_hook(lambda m, a: captured.append(a[0][0]))
             for l in layers]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, text in documents():
        ids = tok(text, return_tensors="pt").input_ids[:, : args.tokens]
        captured.clear()
        with torch.no_grad():
            model(ids)
        trace = np.empty((ids.shape[1], len(layers), TOP_K), dtype=np.int32)
        for l, h in enumerate(captured):  # h [tokens, 1536]: silu(gate x) * up x
            act = h.numpy()[:, groups[l]]  # [tokens, experts, 12]
            norm = np.linalg.norm(act, axis=2)
            top = np.argsort(-norm, axis=1, kind="stable")[:, :TOP_K]
            trace[:, l] = np.sort(top, axis=1)
        dest = out / f"{name.replace('.', '_')}.npy"
        np.save(dest, trace)
        print(f"{dest}: {trace.shape}")
    for h in hooks:
        h.remove()


if __name__ == "__main__":
    main()
