#!/usr/bin/env python3
"""Generates the tiny random-weight llama goldens with Hugging Face transformers.

Writes tests/golden/llama_tiny/ (float32, untied head, default RoPE) and
tests/golden/llama_tiny_tied/ (bfloat16 weights, tied embeddings, llama3 RoPE scaling):
  config.json, generation_config.json, model.safetensors   -- exactly as save_pretrained writes them
  tokenizer.json, tokenizer_config.json                    -- byte-level BPE (vocab 512), ChatML template
  golden.json        prompt_ids [32], greedy_ids [16], versions, checks
  logits.npy         float32 [32, vocab]  prompt forward, all positions
  decode_logits.npy  float32 [16, vocab]  raw logits of each greedy step (step i chose greedy_ids[i])

The reference is always the checkpoint re-loaded from disk in float32 with eager attention, so the
bf16 model's goldens use exactly the bf16-rounded weights the C++ engine reads.

Usage (repo root): tools/.venv/bin/python tools/gen_llama_golden.py
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import golden_common as gc  # noqa: E402

PROMPT_LEN = 32
NEW_TOKENS = 16
VOCAB = 512
INIT_STD = 0.15        # initializer_range: normal(0, std) for all linear/embedding weights
NORM_JITTER = 0.25     # RMSNorm weights = 1 + NORM_JITTER * N(0,1) so norm weights are exercised
MIN_DISTINCT = 6       # greedy continuation must contain at least this many distinct tokens
MIN_MARGIN = 0.02      # top1 - top2 logit margin at every greedy step (robust to fp reordering)
PROMPT_SEED = 1234

VARIANTS = {
    "llama_tiny": dict(
        tie_word_embeddings=False,
        save_dtype=torch.float32,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        base_seed=1000,
    ),
    "llama_tiny_tied": dict(
        tie_word_embeddings=True,
        save_dtype=torch.bfloat16,
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 10000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 32,
        },
        base_seed=2000,
    ),
}


def make_config(v: dict):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=160,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        hidden_act="silu",
        max_position_embeddings=128,
        rms_norm_eps=1e-5,
        rope_parameters=dict(v["rope_parameters"]),
        tie_word_embeddings=v["tie_word_embeddings"],
        initializer_range=INIT_STD,
        bos_token_id=0,  # <|endoftext|>
        eos_token_id=0,
        pad_token_id=None,
        attention_bias=False,
        mlp_bias=False,
    )


def build_and_save(v: dict, seed: int, out_dir: Path) -> None:
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    model = LlamaForCausalLM(make_config(v))
    g = torch.Generator().manual_seed(seed + 7)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + NORM_JITTER * torch.randn(p.shape, generator=g))
    if v["tie_word_embeddings"]:
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    model = model.to(v["save_dtype"])
    model.save_pretrained(str(out_dir))  # v5: always safetensors


def load_reference(model_dir: Path):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        str(model_dir), dtype=torch.float32, attn_implementation="eager"
    )
    model.eval()
    assert model.dtype == torch.float32
    assert model.config._attn_implementation == "eager"
    return model


def prompt_ids() -> list[int]:
    rng = np.random.default_rng(PROMPT_SEED)
    ids = rng.integers(len(gc.SPECIAL_TOKENS), VOCAB, size=PROMPT_LEN).tolist()
    return [int(i) for i in ids]


def generate_variant(name: str, v: dict, tok) -> None:
    out_dir = gc.GOLDEN_DIR / name
    ids = prompt_ids()

    chosen = None
    for seed in range(v["base_seed"], v["base_seed"] + 100):
        with tempfile.TemporaryDirectory() as tmp:
            build_and_save(v, seed, Path(tmp))
            model = load_reference(Path(tmp))
            ref = gc.greedy_reference(model, ids, NEW_TOKENS)
        distinct = len(set(ref["greedy_ids"]))
        print(f"[{name}] seed {seed}: greedy {ref['greedy_ids']} distinct={distinct} "
              f"margin={ref['min_top1_top2_margin']:.4f}")
        if distinct >= MIN_DISTINCT and ref["min_top1_top2_margin"] >= MIN_MARGIN:
            chosen = seed
            break
    if chosen is None:
        raise RuntimeError(f"{name}: no seed gave a varied, unambiguous greedy continuation")

    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    build_and_save(v, chosen, out_dir)
    gc.save_hf_tokenizer(tok, out_dir, model_max_length=128)

    model = load_reference(out_dir)
    rotary = model.model.rotary_emb
    assert rotary.rope_type == v["rope_parameters"]["rope_type"], rotary.rope_type
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float()
    ref = gc.greedy_reference(model, ids, NEW_TOKENS)
    # Step 0 of decoding is the last prompt position of the prefill.
    step0_diff = (logits[-1] - torch.from_numpy(ref["step_logits"][0])).abs().max().item()
    assert step0_diff < 1e-4, step0_diff

    logits_shape = gc.save_npy_f32(out_dir / "logits.npy", logits.numpy())
    decode_shape = gc.save_npy_f32(out_dir / "decode_logits.npy", ref["step_logits"])

    from transformers import AutoTokenizer

    hf_tok = AutoTokenizer.from_pretrained(str(out_dir))
    assert len(hf_tok) == VOCAB
    sample_text = "The capital of France is Paris. Hello, world! 42"
    chat = [{"role": "user", "content": "What is the capital of France?"}]
    chat_text = hf_tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    cfg = model.config
    golden = {
        **gc.versions(),
        "generator": "tools/gen_llama_golden.py",
        "model_dir": f"tests/golden/{name}",
        "weights_dtype": str(v["save_dtype"]).replace("torch.", ""),
        "compute_dtype": "float32",
        "attn_implementation": "eager",
        "seed": chosen,
        "init_std": INIT_STD,
        "norm_weight_jitter": NORM_JITTER,
        "tie_word_embeddings": bool(cfg.tie_word_embeddings),
        "rope_parameters": dict(cfg.rope_parameters),
        "rotary_inv_freq": gc.tensor_to_f64_list(rotary.inv_freq),
        "rotary_attention_scaling": float(rotary.attention_scaling),
        "prompt_seed": PROMPT_SEED,
        "prompt_ids": ids,
        "greedy_ids": ref["greedy_ids"],
        "greedy_note": "model.generate(do_sample=False, max_new_tokens=16, eos_token_id=None): new tokens only",
        "logits_file": "logits.npy",
        "logits_shape": logits_shape,
        "logits_note": "prompt forward (no cache), float32, all positions",
        "decode_logits_file": "decode_logits.npy",
        "decode_logits_shape": decode_shape,
        "decode_logits_note": "raw logits of generate step i (KV cache); argmax == greedy_ids[i]; "
                              "row 0 == logits[31]",
        "min_top1_top2_margin": ref["min_top1_top2_margin"],
        "decode_vs_full_forward_max_abs_diff": ref["decode_vs_full_forward_max_abs_diff"],
        "prompt_logits_std": float(logits.std()),
        "tokenizer_check": {
            "text": sample_text,
            "ids": hf_tok(sample_text, add_special_tokens=True)["input_ids"],
            "chat_messages": chat,
            "chat_text": chat_text,
            "chat_ids": hf_tok(chat_text, add_special_tokens=False)["input_ids"],
            "bos_token": hf_tok.bos_token,
            "bos_token_id": hf_tok.bos_token_id,
            "eos_token": hf_tok.eos_token,
            "eos_token_id": hf_tok.eos_token_id,
        },
    }
    gc.write_json(out_dir / "golden.json", golden)
    total = sum(f.stat().st_size for f in out_dir.iterdir())
    print(f"[{name}] seed {chosen} -> {out_dir} ({total} bytes); greedy {ref['greedy_ids']}")
    assert total < 1.5 * 1024 * 1024, total


def main() -> None:
    torch.set_num_threads(1)  # deterministic reduction order
    tok = gc.train_bytelevel_bpe(VOCAB)
    for name, v in VARIANTS.items():
        generate_variant(name, v, tok)


if __name__ == "__main__":
    main()
