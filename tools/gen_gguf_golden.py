#!/usr/bin/env python3
"""GGUF versions of the tiny MoE golden checkpoints, written by llama.cpp's own converter.

The GGUF files in tests/golden/moe_gguf/ are the independent reference for llama.cpp tensor
names, shapes and metadata keys: they are produced by `convert_hf_to_gguf.py` of a given
llama.cpp checkout (Python converter only; nothing is built), from the HF folders in
tests/golden/moe/ (weights and goldens of which come from tools/gen_moe_golden.py).

    tools/.venv/bin/python tools/gen_gguf_golden.py --llama-cpp /tmp/llama.cpp \
        [--llama-cpp-commit SHA] [name ...]

`--llama-cpp-commit` is needed only when DIR is not a git work tree (e.g. a `git archive`
export); it is recorded in manifest.json / README.md.

The converter runs in a child process (one per model) with the checkout's bundled gguf-py first
on sys.path. Two monkeypatches are applied there, both only about the *tokenizer* (the golden
tokenizer is a small byte-level BPE trained with `tokenizers`, unknown to the converter); the
tensor and hyper-parameter code paths are untouched:

  * `TextModel.get_vocab_base_pre`: when the converter does not recognise the pre-tokenizer hash
    (NotImplementedError), return "gpt-2" (our pre-tokenizer is exactly ByteLevel with the GPT-2
    regex).
  * `TextModel._set_vocab_glm` (used by Glm4Moe / Glm4MoeLite / GlmMoeDsa): it looks up the GLM
    special tokens "[gMASK]", "<|user|>", "<|observation|>" which our tokenizer does not have;
    when "[gMASK]" is missing it falls back to the generic `_set_vocab_gpt2`.

After conversion every file is read back with the `gguf` package and described in
manifest.json (all metadata except tokenizer arrays, all tensors with shapes and dtypes) and a
few layout facts are checked numerically against the HF safetensors (Q/K RoPE permutation,
MLA kv_b split, expert stacking, router bias); the results go into manifest.json as `checks`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SRC_DIR = Path("tests/golden/moe")
OUT_DIR = Path("tests/golden/moe_gguf")
NAMES = ["glm4_moe", "glm4_moe_lite", "deepseek_v3", "glm_moe_dsa", "qwen3_moe", "mixtral",
         "deepseek_v32", "kimi_k25"]
# Multimodal wrappers: the text config and the language model's tensor prefix.
WRAPPERS = {"kimi_k25": "language_model."}
TOKENIZER_ARRAY_KEYS = {
    "tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges",
    "tokenizer.ggml.scores",
}


# --------------------------------------------------------------------------------------------
# child: run the converter with the tokenizer monkeypatches
# --------------------------------------------------------------------------------------------

def child_convert(llama_dir: str, converter_args: list[str]) -> None:
    llama = Path(llama_dir).resolve()
    sys.path.insert(0, str(llama / "gguf-py"))
    sys.path.insert(0, str(llama))
    import gguf  # noqa: F401  (must be the bundled one)
    if not Path(gguf.__file__).resolve().is_relative_to(llama):
        raise SystemExit(f"gguf imported from {gguf.__file__}, not from {llama}/gguf-py")
    from conversion import base  # type: ignore

    orig_pre = base.TextModel.get_vocab_base_pre

    def get_vocab_base_pre(self, tokenizer):
        try:
            return orig_pre(self, tokenizer)
        except NotImplementedError:
            base.logger.warning("gen_gguf_golden: pre-tokenizer hash not recognised -> 'gpt-2'")
            return "gpt-2"

    base.TextModel.get_vocab_base_pre = get_vocab_base_pre

    orig_glm = base.TextModel._set_vocab_glm

    def set_vocab_glm(self):
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(self.dir_model)
        if "[gMASK]" not in tok.get_added_vocab():
            base.logger.warning("gen_gguf_golden: no GLM special tokens -> _set_vocab_gpt2")
            return self._set_vocab_gpt2()
        return orig_glm(self)

    base.TextModel._set_vocab_glm = set_vocab_glm

    # DeepseekV32Model.set_vocab asserts tokenizer_config's add_bos_token (true for the released
    # DeepSeek-V3.2 tokenizer); ours adds no BOS, so go straight to the _set_vocab_gpt2 it calls.
    from conversion import deepseek  # type: ignore

    deepseek.DeepseekV32Model.set_vocab = lambda self: self._set_vocab_gpt2()

    import runpy
    sys.argv = [str(llama / "convert_hf_to_gguf.py")] + converter_args
    runpy.run_path(str(llama / "convert_hf_to_gguf.py"), run_name="__main__")


# --------------------------------------------------------------------------------------------
# parent: describe and check the written files
# --------------------------------------------------------------------------------------------

def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def field_value(field):
    from gguf import GGUFValueType as T
    if not field.types:
        return None
    t0 = field.types[0]
    if t0 == T.ARRAY:
        sub = field.types[-1]
        out = []
        for idx in field.data:
            part = field.parts[idx]
            if sub == T.STRING:
                out.append(bytes(part).decode("utf-8"))
            else:
                out.append(part.tolist()[0])
        return out
    part = field.parts[field.data[0]]
    if t0 == T.STRING:
        return bytes(part).decode("utf-8")
    v = part.tolist()[0]
    if t0 == T.BOOL:
        return bool(v)
    if t0 in (T.FLOAT32, T.FLOAT64):
        return float(v)
    return v


def describe(path: Path) -> dict:
    from gguf import GGUFReader, GGUFValueType
    r = GGUFReader(str(path))
    meta, meta_types, omitted = {}, {}, {}
    for key, field in r.fields.items():
        if key.startswith("GGUF."):
            continue
        if key in TOKENIZER_ARRAY_KEYS:
            omitted[key] = len(field.data)
            continue
        meta[key] = field_value(field)
        t = [GGUFValueType(x).name for x in field.types]
        meta_types[key] = t[0] if len(t) == 1 else f"{t[0]}[{t[-1]}]"
    tensors = []
    for t in r.tensors:
        ne = [int(x) for x in t.shape]  # GGUFReader.shape is ggml ne order (fastest first)
        tensors.append({
            "name": t.name,
            "ne": ne,
            "shape": ne[::-1],
            "dtype": t.tensor_type.name,
        })
    return {
        "gguf_version": int(r.fields["GGUF.version"].parts[-1][0]),
        "architecture": meta.get("general.architecture"),
        "metadata": meta,
        "metadata_types": meta_types,
        "tokenizer_arrays_omitted": omitted,
        "tensor_count": len(tensors),
        "tensors": tensors,
    }


def tensor_data(reader, name):
    import numpy as np
    for t in reader.tensors:
        if t.name == name:
            ne = [int(x) for x in t.shape]
            return np.asarray(t.data, dtype=np.float32).reshape(ne[::-1])
    return None


def llama_permute(w, n_head):
    """LlamaModel.permute of the converter: HF half-split (NeoX) rows -> GGUF interleaved rows."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def run_checks(name: str, gguf_path: Path) -> dict:
    """Numerical layout facts: how HF tensors map onto the GGUF ones."""
    import numpy as np
    from gguf import GGUFReader
    from safetensors.numpy import load_file

    cfg = json.loads((REPO / SRC_DIR / name / "config.json").read_text())
    hf = load_file(str(REPO / SRC_DIR / name / "model.safetensors"))
    hf = {k: v.astype(np.float32) for k, v in hf.items()}
    if name in WRAPPERS:  # compare with the language model's tensors, by their text names
        cfg, prefix = cfg["text_config"], WRAPPERS[name]
        skipped = sorted({k.split(".")[0] for k in hf if not k.startswith(prefix)})
        hf = {k[len(prefix):]: v for k, v in hf.items() if k.startswith(prefix)}
        checks_prefix = {"language model prefix": prefix, "other tensors (not converted)": skipped}
    else:
        checks_prefix = {}
    r = GGUFReader(str(gguf_path))
    checks: dict[str, object] = dict(checks_prefix)

    def same(a, b):
        return a is not None and b is not None and a.shape == b.shape and np.array_equal(a, b)

    n_layers = cfg["num_hidden_layers"]
    moe_layer = None
    for i in range(n_layers):
        if tensor_data(r, f"blk.{i}.ffn_gate_inp.weight") is not None:
            moe_layer = i
            break
    checks["first_moe_layer"] = moe_layer

    checks["token_embd == embed_tokens"] = same(tensor_data(r, "token_embd.weight"), hf["model.embed_tokens.weight"])
    checks["output == lm_head"] = same(tensor_data(r, "output.weight"), hf["lm_head.weight"])

    # GQA Q/K: identical or permuted for interleaved RoPE?
    if "model.layers.0.self_attn.q_proj.weight" in hf:
        nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        for g, h, n in (("attn_q", "q_proj", nh), ("attn_k", "k_proj", nkv)):
            for suf in ("weight", "bias"):
                hk = f"model.layers.0.self_attn.{h}.{suf}"
                if hk not in hf:
                    continue
                gd = tensor_data(r, f"blk.0.{g}.{suf}")
                res = "identical to HF" if same(gd, hf[hk]) else (
                    "LlamaModel.permute(HF) (half-split -> interleaved pairs)"
                    if same(gd, llama_permute(hf[hk], n)) else "other (mismatch)")
                checks[f"blk.0.{g}.{suf} vs {hk}"] = res

    # MLA kv_b split
    kb = "model.layers.0.self_attn.kv_b_proj.weight"
    if kb in hf:
        nh, dn, dv = cfg["num_attention_heads"], cfg["qk_nope_head_dim"], cfg["v_head_dim"]
        w = hf[kb].reshape(nh, dn + dv, -1)
        k_b = np.ascontiguousarray(w[:, :dn, :].transpose(0, 2, 1))  # [n_h, r_kv, d_nope]
        v_b = np.ascontiguousarray(w[:, dn:, :])                      # [n_h, d_v, r_kv]
        g_kb, g_vb = tensor_data(r, "blk.0.attn_k_b.weight"), tensor_data(r, "blk.0.attn_v_b.weight")
        checks["blk.0.attn_kv_b present"] = tensor_data(r, "blk.0.attn_kv_b.weight") is not None
        checks["blk.0.attn_k_b == kv_b.view(n_h, d_n+d_v, r_kv)[:, :d_n].transpose(1,2)  (outer-first [n_h, r_kv, d_nope])"] = same(g_kb, k_b)
        checks["blk.0.attn_v_b == kv_b.view(n_h, d_n+d_v, r_kv)[:, d_n:]  (outer-first [n_h, d_v, r_kv])"] = same(g_vb, v_b)

    # experts + router
    if moe_layer is not None:
        L = moe_layer
        if f"model.layers.{L}.block_sparse_moe.experts.0.w1.weight" in hf:
            pat = {"gate": "block_sparse_moe.experts.{e}.w1", "up": "block_sparse_moe.experts.{e}.w3",
                   "down": "block_sparse_moe.experts.{e}.w2"}
            router = f"model.layers.{L}.block_sparse_moe.gate.weight"
        else:
            pat = {k: f"mlp.experts.{{e}}.{k}_proj" for k in ("gate", "up", "down")}
            router = f"model.layers.{L}.mlp.gate.weight"
        E = cfg.get("n_routed_experts") or cfg.get("num_experts") or cfg.get("num_local_experts")
        for k, p in pat.items():
            stacked = np.stack([hf[f"model.layers.{L}.{p.format(e=e)}.weight"] for e in range(E)])
            checks[f"blk.{L}.ffn_{k}_exps == stack_e(HF {p}.weight)"] = same(
                tensor_data(r, f"blk.{L}.ffn_{k}_exps.weight"), stacked)
        checks[f"blk.{L}.ffn_gate_inp == {router.split(f'layers.{L}.')[1]}"] = same(
            tensor_data(r, f"blk.{L}.ffn_gate_inp.weight"), hf[router])
        bk = f"model.layers.{L}.mlp.gate.e_score_correction_bias"
        if bk in hf:
            checks[f"blk.{L}.exp_probs_b.bias == e_score_correction_bias"] = same(
                tensor_data(r, f"blk.{L}.exp_probs_b.bias"), hf[bk])
    return checks


KNOWN_FAILURES = {
    # (model, substring of the converter's error) -> explanation recorded with the skip
    ("qwen3_moe", "Can not map tensor 'model.layers.0.mlp."): (
        "llama.cpp has no dense-FFN tensors for MODEL_ARCH.QWEN3MOE (gguf-py constants list only "
        "ffn_norm/ffn_gate_inp/ffn_{gate,up,down}_exps; src/models/qwen3moe.cpp creates ffn_gate_inp and "
        "*_exps for every layer) and the converter ignores `mlp_only_layers` / `decoder_sparse_step`; the "
        "golden config has mlp_only_layers [0] (dense layer 0), so the converter stops at "
        "model.layers.0.mlp.down_proj.weight. Released Qwen3-MoE checkpoints have mlp_only_layers [] "
        "(all layers MoE), which is all llama.cpp supports."),
}


def notes_for(entry: dict) -> list[str]:
    """Facts about the written file worth knowing when using it as a reference."""
    arch, meta = entry["architecture"], entry["metadata"]
    names = {t["name"] for t in entry["tensors"]}
    notes = []
    if arch == "deepseek2" and f"{arch}.expert_gating_func" not in meta:
        notes.append(
            "no `deepseek2.expert_gating_func`: the DeepseekV2 converter writes it only from a config "
            "`scoring_func` key, which transformers 5.x configs (DeepseekV3Config, Glm4MoeLiteConfig) "
            "do not save; llama.cpp's deepseek2 loader then defaults to SOFTMAX (SIGMOID only for the "
            "GLM-4.7-Flash shape: 47/48 layers and vocab 154880), while HF uses sigmoid + "
            "e_score_correction_bias. Use sigmoid for this file (the goldens are sigmoid).")
    if "blk.0.post_attention_norm.weight" in names:
        notes.append("HF `post_attention_layernorm` is written as `blk.N.post_attention_norm` "
                     "(LLM_TENSOR_ATTN_POST_NORM), not `ffn_norm`.")
    if f"{arch}.rope.scaling.yarn_log_multiplier" in meta:
        notes.append("`rope.scaling.yarn_log_multiplier` = 0.1 * mscale_all_dim (llama.cpp divides by 0.1 "
                     "on load, TAG_DEEPSEEK2_YARN_LOG_MUL_FIX); `mscale` itself is not written.")
    return notes


def git_commit(llama: Path) -> str | None:
    try:
        return subprocess.run(["git", "-C", str(llama), "rev-parse", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None


def short_value(v, limit=120):
    s = json.dumps(v)
    return s if len(s) <= limit else s[:limit] + "…"


def write_readme(manifest: dict, out: Path) -> None:
    L = []
    L.append("# GGUF goldens (llama.cpp `convert_hf_to_gguf.py` output of the tiny MoE checkpoints)\n")
    L.append("Generated by `tools/gen_gguf_golden.py` (Python converter only; no llama.cpp code or binaries are")
    L.append("stored in this repository):\n")
    L.append("```")
    L.append("tools/.venv/bin/python tools/gen_gguf_golden.py --llama-cpp /path/to/llama.cpp [--llama-cpp-commit SHA]")
    L.append("```\n")
    L.append(f"- llama.cpp commit: `{manifest['llama_cpp_commit']}` ({manifest['llama_cpp_source']})")
    L.append(f"- converter command (per model, run from the repo root): `{manifest['converter_command']}`")
    L.append(f"- Python: transformers {manifest['versions']['transformers']}, torch {manifest['versions']['torch']}, "
             f"gguf-py bundled with the checkout (read back with gguf {manifest['versions']['gguf_reader']})")
    L.append("- Tokenizer workaround (in the generator only, tokenizer metadata only): " + manifest["tokenizer_workaround"])
    L.append("- Source folders are not modified. Weights are float32 (`--outtype f32`), bit-identical to the")
    L.append("  safetensors (see `checks` in manifest.json), so the HF goldens `tests/golden/moe/<name>/logits.npy`")
    L.append("  apply to these files too (up to the engine's GGUF-specific layout handling).\n")
    L.append("`manifest.json` has, per file: source folder, `general.architecture`, sha256, every metadata key")
    L.append("and value except the tokenizer arrays (`tokenizer.ggml.tokens/token_type/merges`, counts given),")
    L.append("the GGUF value type of each key, every tensor (`ne` = ggml order as stored, fastest first;")
    L.append("`shape` = outer-first, i.e. reversed `ne`, the numpy/torch view) with dtype, and `checks`:")
    L.append("numerical comparisons against the HF safetensors.\n")
    L.append("| file | source | general.architecture | tensors | size |")
    L.append("|---|---|---|---|---|")
    for f in manifest["files"]:
        if f.get("skipped"):
            L.append(f"| — | `{f['source']}` | — | — | **not converted**: `{f['skipped']}` |")
        else:
            L.append(f"| `{f['file']}` | `{f['source']}` | `{f['architecture']}` | {f['tensor_count']} | "
                     f"{f['bytes']} bytes |")
    L.append("")
    for f in manifest["files"]:
        if f.get("skipped"):
            L.append(f"**`{f['source']}` not converted.** {f.get('reason', f['skipped'])}\n")
    for f in manifest["files"]:
        if f.get("skipped"):
            continue
        L.append(f"## `{f['file']}` (`{f['architecture']}`)\n")
        for n in f["notes"]:
            L.append(f"- Note: {n}")
        if f["notes"]:
            L.append("")
        L.append("Metadata (tokenizer arrays omitted):\n")
        L.append("| key | type | value |")
        L.append("|---|---|---|")
        for k, v in f["metadata"].items():
            if k == "tokenizer.chat_template":
                v = "(ChatML template string)"
            L.append(f"| `{k}` | {f['metadata_types'][k]} | `{short_value(v)}` |")
        L.append("")
        L.append("Tensors (`shape` outer-first; `ne` is the reverse):\n")
        L.append("| name | shape | dtype |")
        L.append("|---|---|---|")
        for t in f["tensors"]:
            L.append(f"| `{t['name']}` | {t['shape']} | {t['dtype']} |")
        L.append("")
        L.append("Checks against the HF safetensors:\n")
        for k, v in f["checks"].items():
            L.append(f"- {k}: `{v}`")
        L.append("")
    (out / "README.md").write_text("\n".join(L) + "\n")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--_child":
        child_convert(sys.argv[2], sys.argv[3:])
        return

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-cpp", required=True, type=Path, help="llama.cpp checkout (source tree)")
    ap.add_argument("--llama-cpp-commit", help="commit of that checkout if it is not a git work tree")
    ap.add_argument("names", nargs="*", default=NAMES)
    args = ap.parse_args()

    llama = args.llama_cpp.resolve()
    if not (llama / "convert_hf_to_gguf.py").is_file():
        raise SystemExit(f"{llama}/convert_hf_to_gguf.py not found")
    commit = git_commit(llama) or args.llama_cpp_commit
    if not commit:
        raise SystemExit("not a git work tree: pass --llama-cpp-commit")
    if args.llama_cpp_commit and commit != args.llama_cpp_commit:
        raise SystemExit(f"checkout is at {commit}, not {args.llama_cpp_commit}")

    out = REPO / OUT_DIR
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "manifest.json"
    old = {}
    if manifest_path.is_file() and set(args.names) != set(NAMES):
        old = {f["source"]: f for f in json.loads(manifest_path.read_text())["files"]}

    import gguf as gguf_reader_pkg
    import torch
    import transformers

    entries = []
    for name in NAMES:
        src = SRC_DIR / name
        if name not in args.names:
            if str(src) in old:
                entries.append(old[str(src)])
            continue
        dst = OUT_DIR / f"{name}.gguf"
        conv_args = [str(src), "--outtype", "f32", "--outfile", str(dst)]
        env = dict(os.environ)
        env.pop("NO_LOCAL_GGUF", None)
        env["PYTHONHASHSEED"] = "0"
        print(f"== {name}: convert_hf_to_gguf.py {' '.join(conv_args)}", flush=True)
        p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--_child", str(llama)] + conv_args,
                           cwd=REPO, env=env, capture_output=True, text=True)
        log_tail = (p.stdout + p.stderr).strip().splitlines()[-15:]
        if p.returncode != 0:
            (REPO / dst).unlink(missing_ok=True)
            err = next((ln for ln in reversed(log_tail) if "Error" in ln or "error" in ln), log_tail[-1]).strip()
            print("\n".join(log_tail), flush=True)
            why = next((v for (n, sub), v in KNOWN_FAILURES.items() if n == name and sub in err), None)
            entries.append({"source": str(src), "skipped": err, **({"reason": why} if why else {})})
            continue
        d = describe(REPO / dst)
        entry = {"file": dst.name, "source": str(src),
                 "source_safetensors_sha256": sha256(REPO / src / "model.safetensors"),
                 "sha256": sha256(REPO / dst), "bytes": (REPO / dst).stat().st_size}
        entry.update(d)
        entry["checks"] = run_checks(name, REPO / dst)
        entry["notes"] = notes_for(entry)
        entries.append(entry)
        print(f"   -> {dst} ({entry['architecture']}, {entry['tensor_count']} tensors)", flush=True)

    manifest = {
        "generator": "tools/gen_gguf_golden.py",
        "llama_cpp_commit": commit,
        "llama_cpp_source": "github.com/ggml-org/llama.cpp, via the mirror github:ngxson/llama.cpp",
        "converter_command": "python convert_hf_to_gguf.py tests/golden/moe/<name> --outtype f32 "
                             "--outfile tests/golden/moe_gguf/<name>.gguf",
        "tokenizer_workaround": (
            "get_vocab_base_pre returns 'gpt-2' when the pre-tokenizer hash is unknown (NotImplementedError); "
            "_set_vocab_glm falls back to _set_vocab_gpt2 when the tokenizer has no '[gMASK]' "
            "(GLM special tokens absent); DeepseekV32Model.set_vocab goes straight to the "
            "_set_vocab_gpt2 it calls, without its assert that tokenizer_config sets add_bos_token "
            "(ours adds no BOS). Tensors and hyper-parameters are converted by unmodified code."),
        "versions": {"python": sys.version.split()[0], "transformers": transformers.__version__,
                     "torch": torch.__version__, "gguf_reader": getattr(gguf_reader_pkg, "__version__", None)
                     or _pkg_version("gguf")},
        "files": entries,
    }
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    write_readme(manifest, out)
    print(f"wrote {manifest_path.relative_to(REPO)} and README.md")


def _pkg_version(name: str) -> str | None:
    from importlib.metadata import version, PackageNotFoundError
    try:
        return version(name)
    except PackageNotFoundError:
        return None


if __name__ == "__main__":
    main()
