#!/usr/bin/env python3
"""Quantised GGUF goldens: tiny GLM-5 / DeepSeek-V3 checkpoints through llama.cpp's
converter and llama-quantize, with transformers run on the weights as the `gguf`
package dequantises them.

Steps (everything large goes to --work, outside the repository):
  1. `<arch>_w256`: a tiny random checkpoint (tools/gen_moe_golden.py's recipe) whose
     every matmul input width is a multiple of 256, the super-block of the k- and
     i-quants: hidden, q_lora_rank, kv_lora_rank, n_heads * v_head_dim, the dense and
     expert ffn widths are all 256. (attn_k_b's rows are qk_nope_head_dim = 32 wide, so
     llama-quantize gives that one tensor a 32-block fallback type.)
  2. convert_hf_to_gguf.py --outtype f32 (tools/gen_gguf_golden.py's child, same
     tokenizer workaround), an importance matrix from llama-imatrix on the GPL-3 text,
     then llama-quantize --imatrix to every type in TYPES, and to one mixed file per
     architecture in which tensors carry different types, like the real releases.
  3. Reference per file: every tensor dequantised by gguf.quants.dequantize, mapped back
     to the HF names (attn_k_b / attn_v_b re-joined into kv_b_proj), loaded into the
     checkpoint's transformers model (f32, eager): prompt logits [40, V], 16 greedy ids
     and the logits of each greedy step.
  4. `--check ANYMOE`: runs `anymoe run --exact --kv-type f32` on each file and compares
     the greedy ids and step logits with the reference (max |diff| reported).

Committed (small): tests/golden/quant/glm_moe_dsa_w256_mixed.gguf + golden.json + logits.npy, read
by tests/models/quant_golden_test.cc; the per-type sweep is summarised in
tests/golden/quant/sweep.json (files stay in --work).

Run (repo root; llama.cpp built beside the project, never in it):
  tools/.venv/bin/python tools/gen_quant_golden.py --llama-cpp /work/ext/llama.cpp \
      --work /work/ext/quant-work [--check build/src/anymoe]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import golden_common as gc  # noqa: E402
import gen_moe_golden as moe  # noqa: E402

REPO = gc.REPO_ROOT
OUT = gc.GOLDEN_DIR / "quant"
TEXT = Path("/usr/share/common-licenses/GPL-3")
NEW_TOKENS = 16

TYPES = ["Q2_K", "Q3_K_M", "Q5_0", "Q5_1", "IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S",
         "IQ3_XXS", "IQ3_S", "IQ4_XS", "IQ4_NL", "MXFP4_MOE"]

W256 = dict(hidden_size=256, intermediate_size=256, moe_intermediate_size=256,
            num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
            q_lora_rank=256, kv_lora_rank=256, qk_nope_head_dim=32, qk_rope_head_dim=32,
            v_head_dim=128, first_k_dense_replace=1, n_routed_experts=4, num_experts_per_tok=2,
            n_shared_experts=1, n_group=2, topk_group=1, max_position_embeddings=128,
            num_nextn_predict_layers=0,
            # gen_moe_golden's 0.15 scaled by sqrt(64 / 256), so that activations and
            # logits stay as large as in the 64-wide goldens (|logit| ~ 5, not ~ 10).
            initializer_range=0.075)
ARCHS = {
    # index_topk 64 >= prompt + continuation: the indexer runs but keeps every key. With
    # 1-2 bit weights many indexer scores tie exactly (relu to 0), and transformers'
    # torch.topk orders ties arbitrarily, so a smaller top-k would make the reference
    # itself ill-defined; DSA selection is checked on the f32 goldens.
    "glm_moe_dsa_w256": (dict(moe.GLM_MOE_DSA, **W256, index_n_heads=4, index_head_dim=64,
                              index_topk=64, indexer_types=["full", "full"],
                              mlp_layer_types=["dense", "sparse"]), "glm_moe_dsa", 11000),
    "deepseek_v3_w256": (dict(moe.DEEPSEEK_V3, **W256), "deepseek_v3", 12000),
}

# Mixed files committed as CI goldens (~1.2 MB each; DeepSeek-V3's stays in the sweep).
COMMITTED = {"glm_moe_dsa_w256"}

# The mixed files: one type per tensor family, every new type used at least once
# (experts in 1-3 bits as the real "dynamic" releases do, attention at 4-5 bits).
MIXED = {
    r"blk\.0\.ffn_gate\.": "iq1_s", r"blk\.0\.ffn_up\.": "iq1_m", r"blk\.0\.ffn_down\.": "q2_k",
    r"ffn_gate_exps": "iq2_xxs", r"ffn_up_exps": "iq2_xs", r"ffn_down_exps": "q3_k",
    r"ffn_gate_shexp": "iq2_s", r"ffn_up_shexp": "iq3_xxs", r"ffn_down_shexp": "iq3_s",
    r"attn_q_a\.": "iq4_xs", r"attn_q_b\.": "iq4_nl", r"attn_kv_a_mqa": "q5_0",
    r"attn_output": "q5_1", r"attn_v_b": "mxfp4", r"indexer\.attn_q_b": "q4_k",
    r"output\.weight": "q6_k",
}


# --------------------------------------------------------------------------------------------
# checkpoints and llama.cpp steps

def build_checkpoint(name: str, work: Path) -> Path:
    cfg, tok_src, seed = ARCHS[name]
    out = work / name
    if (out / "model.safetensors").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    state = moe.build_state(cfg, seed)
    moe.save_member(cfg, dict(name=name, override={}, dtype=torch.float32), state, out)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(gc.GOLDEN_DIR / "moe" / tok_src / f, out / f)
    return out


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise SystemExit(f"failed: {' '.join(map(str, cmd))}\n{(p.stdout + p.stderr)[-3000:]}")
    return p


def convert(llama: Path, folder: Path, dst: Path, extra: list[str] = ()) -> None:
    if dst.exists():
        return
    env = dict(os.environ, PYTHONHASHSEED="0")
    env.pop("NO_LOCAL_GGUF", None)
    run([sys.executable, REPO / "tools" / "gen_gguf_golden.py", "--_child", llama, folder,
         "--outtype", "f32", "--outfile", dst, *extra], cwd=REPO, env=env)


def imatrix(llama: Path, f32: Path, dst: Path) -> None:
    if dst.exists():
        return
    run([llama / "build/bin/llama-imatrix", "-m", f32, "-f", TEXT, "-c", "64", "--chunks", "40",
         "-o", dst, "-t", "2"])


def quantize(llama: Path, f32: Path, im: Path, dst: Path, qtype: str,
             overrides: dict[str, str] | None = None) -> None:
    if dst.exists():
        return
    cmd = [llama / "build/bin/llama-quantize", "--imatrix", im]
    for pattern, t in (overrides or {}).items():
        cmd += ["--tensor-type", f"{pattern}={t}"]
    run(cmd + [f32, dst, qtype, "2"])


# --------------------------------------------------------------------------------------------
# reference: gguf dequantisation -> HF state -> transformers

LAYER_MAP = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q_a": "self_attn.q_a_proj", "attn_q_a_norm": "self_attn.q_a_layernorm",
    "attn_q_b": "self_attn.q_b_proj", "attn_kv_a_mqa": "self_attn.kv_a_proj_with_mqa",
    "attn_kv_a_norm": "self_attn.kv_a_layernorm", "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
    "ffn_gate_inp": "mlp.gate", "ffn_gate_shexp": "mlp.shared_experts.gate_proj",
    "ffn_up_shexp": "mlp.shared_experts.up_proj", "ffn_down_shexp": "mlp.shared_experts.down_proj",
    "indexer.attn_q_b": "self_attn.indexer.wq_b", "indexer.attn_k": "self_attn.indexer.wk",
    "indexer.k_norm": "self_attn.indexer.k_norm", "indexer.proj": "self_attn.indexer.weights_proj",
}
GLOBAL_MAP = {"token_embd.weight": "model.embed_tokens.weight",
              "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight"}


def dequantised_tensors(path: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    from gguf import GGUFReader
    from gguf.quants import dequantize

    reader = GGUFReader(str(path))
    out, types = {}, {}
    for t in reader.tensors:
        shape = [int(x) for x in reversed(t.shape)]
        out[t.name] = np.array(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(shape)
        types[t.name] = t.tensor_type.name
    return out, types


def hf_state(gg: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """GGUF names and layouts back to transformers v5's in-memory state dict."""
    sd, layers = {}, {}
    for name, a in gg.items():
        if name in GLOBAL_MAP:
            sd[GLOBAL_MAP[name]] = torch.from_numpy(a)
            continue
        m = re.match(r"blk\.(\d+)\.(.+)\.(weight|bias)$", name)
        assert m, name
        layers.setdefault(int(m.group(1)), {})[f"{m.group(2)}.{m.group(3)}"] = a
    for i, ts in layers.items():
        p = f"model.layers.{i}."
        for key, a in ts.items():
            module, suffix = key.rsplit(".", 1)
            if module == "exp_probs_b":
                sd[p + "mlp.gate.e_score_correction_bias"] = torch.from_numpy(a)
            elif module in LAYER_MAP:
                sd[p + LAYER_MAP[module] + "." + suffix] = torch.from_numpy(a)
        if "attn_k_b.weight" in ts:  # [n_h, r, d_nope] and [n_h, d_v, r] -> [n_h*(d_nope+d_v), r]
            kb, vb = ts["attn_k_b.weight"], ts["attn_v_b.weight"]
            kv = np.concatenate([kb.transpose(0, 2, 1), vb], axis=1)
            sd[p + "self_attn.kv_b_proj.weight"] = torch.from_numpy(kv.reshape(-1, kv.shape[-1]))
        if "ffn_gate_exps.weight" in ts:  # fused in memory: [E, 2I, H] gate then up; [E, H, I]
            gate_up = np.concatenate([ts["ffn_gate_exps.weight"], ts["ffn_up_exps.weight"]], axis=1)
            sd[p + "mlp.experts.gate_up_proj"] = torch.from_numpy(gate_up)
            sd[p + "mlp.experts.down_proj"] = torch.from_numpy(ts["ffn_down_exps.weight"])
    return sd


def reference(gguf_path: Path, folder: Path, ids: list[int]) -> dict:
    gg, types = dequantised_tensors(gguf_path)
    model = moe.load_reference(folder)
    sd = model.state_dict()
    new = hf_state(gg)
    missing = sorted(set(sd) - set(new))
    assert not missing, f"{gguf_path.name}: no GGUF tensor for {missing}"
    with torch.no_grad():
        for k, v in new.items():
            assert sd[k].shape == v.shape, (k, sd[k].shape, v.shape)
            sd[k].copy_(v)
        logits = model(torch.tensor([ids]), use_cache=False).logits[0].float()
        gen = model.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False,
                             eos_token_id=None, pad_token_id=0, output_scores=True,
                             output_logits=True, return_dict_in_generate=True)
    greedy = gen.sequences[0, len(ids):].tolist()
    steps = torch.stack([s[0].float() for s in gen.logits]).numpy()
    counts: dict[str, int] = {}
    for t in types.values():
        counts[t] = counts.get(t, 0) + 1
    return {"prompt_logits": logits.numpy(), "greedy": greedy, "step_logits": steps,
            "types": counts}


def check_anymoe(anymoe: Path, gguf_path: Path, ids: list[int], ref: dict, work: Path) -> dict:
    npy = work / (gguf_path.stem + ".anymoe_logits.npy")
    p = subprocess.run([anymoe, "run", "-m", gguf_path, "--exact", "--kv-type", "f32", "-t", "2",
                        "--prompt-tokens", ",".join(map(str, ids)), "-n", str(NEW_TOKENS),
                        "--temp", "0", "--ignore-eos", "--print-tokens", "--logits-out", npy],
                       capture_output=True, text=True, errors="replace")
    if p.returncode != 0:
        return {"error": (p.stdout + p.stderr).strip().splitlines()[-1]}
    tokens = [int(x) for x in re.search(r"tokens: ([\d,]+)", p.stdout).group(1).split(",")]
    ours = np.load(npy)
    return {"same_greedy": tokens == ref["greedy"],
            "max_abs_diff_step_logits": float(np.abs(ours - ref["step_logits"]).max())}


# --------------------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-cpp", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--check", type=Path, help="anymoe binary to compare on every file")
    ap.add_argument("--types", nargs="*", default=TYPES)
    args = ap.parse_args()
    torch.set_num_threads(2)
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    llama = args.llama_cpp.resolve()
    ids = moe.prompt_ids()
    sweep = {"llama_cpp_commit": (llama / "SOURCE_COMMIT").read_text().strip()
             if (llama / "SOURCE_COMMIT").exists() else None,
             "versions": gc.versions(), "files": []}
    OUT.mkdir(parents=True, exist_ok=True)
    for name in ARCHS:
        folder = build_checkpoint(name, work)
        f32 = work / f"{name}.f32.gguf"
        convert(llama, folder, f32)
        im = work / f"{name}.imatrix.gguf"
        imatrix(llama, f32, im)
        jobs = [(t, work / f"{name}.{t}.gguf", None) for t in args.types]
        jobs.append(("mixed", work / f"{name}.mixed.gguf", MIXED))
        for label, dst, overrides in jobs:
            quantize(llama, f32, im, dst, "Q8_0" if overrides else label, overrides)
            ref = reference(dst, folder, ids)
            entry = {"file": dst.name, "arch": name, "ftype": label, "bytes": dst.stat().st_size,
                     "tensor_types": ref["types"], "greedy": ref["greedy"]}
            if args.check:
                entry.update(check_anymoe(args.check.resolve(), dst, ids, ref, work))
            print(json.dumps(entry), flush=True)
            sweep["files"].append(entry)
            if overrides and name in COMMITTED:
                shutil.copy(dst, OUT / f"{name}_mixed.gguf")
                gdir = OUT / f"{name}_mixed"
                gdir.mkdir(exist_ok=True)
                np.save(gdir / "logits.npy", ref["prompt_logits"].astype(np.float32))
                (gdir / "golden.json").write_text(json.dumps({
                    "file": f"quant/{name}_mixed.gguf", "prompt_ids": ids,
                    "greedy_ids": ref["greedy"], "tensor_types": ref["types"],
                    "overrides": overrides, "versions": gc.versions(),
                    "reference": "transformers (eager, f32) on gguf.quants.dequantize of every "
                                 "tensor, mapped back to HF names"}, indent=1) + "\n")
    (OUT / "sweep.json").write_text(json.dumps(sweep, indent=1) + "\n")


if __name__ == "__main__":
    main()
