#!/usr/bin/env python3
"""Generates tests/golden/smollm2/ from the default model (SmolLM2-135M-Instruct, GGUF Q4_1) with
Hugging Face transformers, which de-quantises the GGUF to float32 on load (and un-permutes the
llama.cpp Q/K row permutation).

  golden.json            versions, model file + sha256, per prompt: text, ids, BOS info, greedy ids
                         + decoded text, per-step top1-top2 margins
  logits_first_step.npy  float32 [3, vocab]  logits at the last prompt position (chose greedy[0])
  prompt_a_logits.npy    float32 [T, vocab]  full prompt-forward logits of prompt (a)

Reference: float32, eager attention, model.generate(do_sample=False, max_new_tokens=32),
eos never stops generation, no repetition penalty.

Usage (repo root): tools/.venv/bin/python tools/gen_smollm2_golden.py
(runs scripts/fetch-default-model.sh when models/ lacks the GGUF)
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import golden_common as gc  # noqa: E402

MODELS_DIR = gc.REPO_ROOT / "models"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
NEW_TOKENS = 32
MAX_FULL_LOGITS_BYTES = 1024 * 1024


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def gguf_tokenizer_flags(path: Path) -> dict:
    from gguf import GGUFReader

    r = GGUFReader(str(path))
    out = {}
    for key in ("tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token",
                "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                "tokenizer.ggml.model", "tokenizer.ggml.pre"):
        f = r.fields.get(key)
        if f is not None:
            v = f.contents()
            out[key] = v.item() if hasattr(v, "item") else v
    return out


def main() -> None:
    torch.set_num_threads(2)
    gguf_path = MODELS_DIR / GGUF_NAME
    if not gguf_path.exists():
        subprocess.run([str(gc.REPO_ROOT / "scripts" / "fetch-default-model.sh")], check=True)

    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(MODELS_DIR), gguf_file=GGUF_NAME)
    model = AutoModelForCausalLM.from_pretrained(
        str(MODELS_DIR), gguf_file=GGUF_NAME, dtype=torch.float32, attn_implementation="eager"
    )
    model.eval()
    assert model.dtype == torch.float32 and model.config._attn_implementation == "eager"
    vocab = model.config.vocab_size

    chat = [{"role": "user", "content": "What is the capital of France?"}]
    chat_text = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    chat_ids = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=True)
    if not isinstance(chat_ids, list):
        chat_ids = chat_ids["input_ids"]
    # The rendered template must tokenize the same way as apply_chat_template's own ids.
    assert tok(chat_text, add_special_tokens=False)["input_ids"] == list(chat_ids)

    prompts = [
        dict(name="a_plain", kind="text", text="The capital of France is"),
        dict(name="b_chat", kind="chat_template", messages=chat, text=chat_text,
             ids=list(chat_ids)),
        dict(name="c_code", kind="text", text="def fibonacci(n):\n"),
    ]

    records, first_step, prompt_a_logits = [], [], None
    for p in prompts:
        if p["kind"] == "text":
            ids = tok(p["text"])["input_ids"]  # add_special_tokens=True (default)
            no_special = tok(p["text"], add_special_tokens=False)["input_ids"]
            tokenizer_added_bos = len(ids) > len(no_special) and ids[0] == tok.bos_token_id
        else:
            ids = p["ids"]
            tokenizer_added_bos = False  # template text tokenized with add_special_tokens=False
        ids = [int(i) for i in ids]
        ref = gc.greedy_reference(model, ids, NEW_TOKENS)
        first_step.append(ref["step_logits"][0])
        top2 = torch.from_numpy(ref["step_logits"]).topk(2, dim=-1).values
        margins = (top2[:, 0] - top2[:, 1]).tolist()

        with torch.no_grad():
            full = model(torch.tensor([ids])).logits[0].float()
        diff0 = (full[-1] - torch.from_numpy(ref["step_logits"][0])).abs().max().item()
        assert diff0 < 1e-3, diff0
        if p["name"] == "a_plain":
            prompt_a_logits = full.numpy()

        rec = {
            "name": p["name"],
            "kind": p["kind"],
            "text": p["text"],
        }
        if "messages" in p:
            rec["messages"] = p["messages"]
            rec["apply_chat_template"] = "add_generation_prompt=True"
        rec.update({
            "prompt_ids": ids,
            "prompt_len": len(ids),
            "starts_with_bos_token": ids[0] == tok.bos_token_id,
            "tokenizer_added_bos": bool(tokenizer_added_bos),
            "greedy_ids": ref["greedy_ids"],
            "greedy_text": tok.decode(ref["greedy_ids"], skip_special_tokens=False),
            "greedy_tokens": tok.convert_ids_to_tokens(ref["greedy_ids"]),
            "greedy_step_margins": margins,
            "min_top1_top2_margin": ref["min_top1_top2_margin"],
            "decode_vs_full_forward_max_abs_diff": ref["decode_vs_full_forward_max_abs_diff"],
            "first_step_argmax": int(np.argmax(ref["step_logits"][0])),
        })
        records.append(rec)
        print(f"[{p['name']}] ids={ids}\n  -> {rec['greedy_text']!r}\n  min margin "
              f"{rec['min_top1_top2_margin']:.4f}, decode/full diff "
              f"{rec['decode_vs_full_forward_max_abs_diff']:.2e}")

    out_dir = gc.GOLDEN_DIR / "smollm2"
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.iterdir():
        old.unlink()
    first_shape = gc.save_npy_f32(out_dir / "logits_first_step.npy", np.stack(first_step))
    golden = {
        **gc.versions(),
        "gguf_version": importlib.metadata.version("gguf"),
        "generator": "tools/gen_smollm2_golden.py",
        "model_file": f"models/{GGUF_NAME}",
        "model_sha256": sha256(gguf_path),
        "load": "AutoModelForCausalLM.from_pretrained(models, gguf_file=..., dtype=float32, "
                "attn_implementation='eager') (GGUF de-quantised to float32)",
        "generation": "model.generate(do_sample=False, max_new_tokens=32, eos_token_id=None, "
                      "no repetition penalty); KV cache",
        "vocab_size": vocab,
        "bos_token": tok.bos_token,
        "bos_token_id": tok.bos_token_id,
        "eos_token": tok.eos_token,
        "eos_token_id": tok.eos_token_id,
        "gguf_tokenizer_metadata": gguf_tokenizer_flags(gguf_path),
        "chat_template": tok.chat_template,
        "prompts": records,
        "logits_first_step_file": "logits_first_step.npy",
        "logits_first_step_shape": first_shape,
        "logits_first_step_note": "row i: float32 logits at the last prompt position of prompts[i] "
                                  "(the step that chose greedy_ids[0])",
    }
    if prompt_a_logits.nbytes < MAX_FULL_LOGITS_BYTES:
        golden["prompt_a_logits_file"] = "prompt_a_logits.npy"
        golden["prompt_a_logits_shape"] = gc.save_npy_f32(out_dir / "prompt_a_logits.npy",
                                                          prompt_a_logits)
        golden["prompt_a_logits_note"] = "float32 prompt-forward logits of prompts[0], all positions"
    gc.write_json(out_dir / "golden.json", golden)
    for f in sorted(out_dir.iterdir()):
        print(f"{f}: {f.stat().st_size} bytes")


if __name__ == "__main__":
    main()
