"""Shared helpers for the golden-data generators (tools/gen_*_golden.py).

Golden data is produced by independent references (Hugging Face `transformers`,
`tokenizers`) and committed under tests/golden/. Nothing here is needed to build
or test anymoe. Run the generators from the repo root with tools/.venv/bin/python.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
GOLDEN_DIR = REPO_ROOT / "tests" / "golden"

# ChatML, as used by SmolLM2 / Qwen (without any default system prompt).
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# Built-in English training text for the tiny byte-level BPE tokenizers (kept in
# the source so the trained vocabulary is reproducible without any download).
ENGLISH_TEXT = """\
The quick brown fox jumps over the lazy dog. A journey of a thousand miles begins with a single step.
It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of
foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light,
it was the season of Darkness, it was the spring of hope, it was the winter of despair.

Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my purse,
and nothing particular to interest me on shore, I thought I would sail about a little and see the
watery part of the world. It is a way I have of driving off the spleen and regulating the circulation.

It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in
want of a wife. However little known the feelings or views of such a man may be on his first entering
a neighbourhood, this truth is so well fixed in the minds of the surrounding families, that he is
considered the rightful property of some one or other of their daughters.

The capital of France is Paris. The capital of Germany is Berlin. The capital of Italy is Rome.
The capital of Spain is Madrid. Paris is known for the Eiffel Tower, the Louvre and its cafes.
London is the capital of the United Kingdom, and the river Thames flows through the city.

A language model reads a sequence of tokens and predicts the next token. The model is trained on a
large amount of text, and during inference it generates one token at a time. Each new token is added
to the context, and the attention layers look back at all previous tokens through the key and value
cache. Rotary position embeddings rotate the query and key vectors by an angle that depends on the
position, so that the attention score depends on the relative distance between two tokens.

def fibonacci(n):
    if n < 2:
        return n
    return fibonacci(n - 1) + fibonacci(n - 2)

for i in range(10):
    print(i, fibonacci(i))

Once upon a time there was a little girl who lived in a village near the forest. Whenever she went
out, the little girl wore a red riding cloak, so everyone in the village called her Little Red Riding
Hood. One morning, Little Red Riding Hood asked her mother if she could go to visit her grandmother
as it had been awhile since they had seen each other. "That's a good idea," her mother said.

Numbers: 0 1 2 3 4 5 6 7 8 9 10 11 12 42 100 256 512 1024 2048 4096 3.14159 2.71828.
Punctuation and symbols: ( ) [ ] { } < > = + - * / % & | ^ ~ ! ? , . ; : ' " # @ $ _ \\ `
Hello, world! How are you today? I am fine, thank you. What is the weather like? It is sunny.
"""


def versions() -> dict:
    import tokenizers
    import torch
    import transformers

    return {
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "tokenizers_version": tokenizers.__version__,
        "numpy_version": np.__version__,
    }


def _dumps(o, level: int) -> str:
    """json.dumps with one-line lists of scalars (and of such lists) to keep goldens readable."""
    pad, pad1 = " " * level, " " * (level + 1)
    if isinstance(o, dict):
        if not o:
            return "{}"
        items = [f"{pad1}{json.dumps(str(k))}: {_dumps(v, level + 1)}" for k, v in o.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(o, (list, tuple)):
        flat = all(not isinstance(x, (dict, list, tuple)) for x in o)
        if flat:
            return "[" + ", ".join(_dumps(x, level + 1) for x in o) + "]"
        return "[\n" + ",\n".join(pad1 + _dumps(x, level + 1) for x in o) + "\n" + pad + "]"
    if isinstance(o, float):
        if not math.isfinite(o):
            raise ValueError(f"non-finite float in golden JSON: {o}")
        return repr(o)  # shortest repr that round-trips the float64 exactly
    return json.dumps(o, ensure_ascii=False)


def write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = _dumps(obj, 0) + "\n"
    assert json.loads(text) == json.loads(json.dumps(obj))
    path.write_text(text, encoding="utf-8")


def save_npy_f32(path: Path, arr) -> list[int]:
    a = np.ascontiguousarray(np.asarray(arr, dtype=np.float32))
    np.save(path, a, allow_pickle=False)
    return list(a.shape)


def tensor_to_f64_list(t) -> list:
    """float32 (or any) torch tensor -> nested list of Python floats (exact widening to float64)."""
    return t.detach().to("cpu").double().tolist()


def train_bytelevel_bpe(vocab_size: int, text: str = ENGLISH_TEXT):
    """Byte-level BPE trained with the `tokenizers` library; ids 0..2 are the special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=1,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # Repeat paragraphs in a fixed order; the trainer is deterministic for a fixed corpus.
    paragraphs = [p for p in text.split("\n\n") if p.strip()]
    tok.train_from_iterator(paragraphs, trainer=trainer)
    if tok.get_vocab_size() != vocab_size:
        raise RuntimeError(f"trained vocab {tok.get_vocab_size()} != {vocab_size}; add more text")
    for i, s in enumerate(SPECIAL_TOKENS):
        assert tok.token_to_id(s) == i, (s, tok.token_to_id(s))
    return tok


def save_hf_tokenizer(tok, out_dir: Path, model_max_length: int) -> None:
    """Saves tokenizer.json + tokenizer_config.json (with the ChatML chat_template inline)."""
    from transformers import PreTrainedTokenizerFast

    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token=None,
        additional_special_tokens=["<|im_start|>", "<|im_end|>"],
        model_max_length=model_max_length,
        chat_template=CHATML_TEMPLATE,
        clean_up_tokenization_spaces=False,
    )
    # save_jinja_files=False keeps chat_template inside tokenizer_config.json (as most Hub
    # checkpoints ship it) instead of a separate chat_template.jinja.
    hf.save_pretrained(str(out_dir), save_jinja_files=False)
    cfg_path = out_dir / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    if cfg.get("chat_template") != CHATML_TEMPLATE:
        raise RuntimeError("chat_template missing from tokenizer_config.json")


def greedy_reference(model, prompt_ids: list[int], max_new_tokens: int) -> dict:
    """Greedy continuation with `model.generate` (KV cache) plus the raw logits of every step.

    EOS never stops generation (eos_token_id=None), no repetition penalty, no sampling. Also
    re-runs a single cache-less forward over prompt+continuation to cross-check the decode logits.
    """
    import copy

    import torch

    gen_cfg = copy.deepcopy(model.generation_config)
    gen_cfg.do_sample = False
    gen_cfg.num_beams = 1
    gen_cfg.eos_token_id = None
    gen_cfg.max_new_tokens = max_new_tokens
    gen_cfg.min_new_tokens = None
    gen_cfg.repetition_penalty = None
    gen_cfg.temperature = None
    gen_cfg.top_k = None
    gen_cfg.top_p = None
    gen_cfg.output_logits = True
    gen_cfg.return_dict_in_generate = True
    if gen_cfg.pad_token_id is None:
        gen_cfg.pad_token_id = 0

    input_ids = torch.tensor([prompt_ids], dtype=torch.long)
    # generate() fills every None field of gen_cfg from model.generation_config, so eos must be
    # cleared there too, or generation would still stop on the model's eos token.
    saved_eos = model.generation_config.eos_token_id
    model.generation_config.eos_token_id = None
    try:
        with torch.no_grad():
            out = model.generate(
                input_ids, attention_mask=torch.ones_like(input_ids), generation_config=gen_cfg
            )
    finally:
        model.generation_config.eos_token_id = saved_eos
    new_ids = out.sequences[0, len(prompt_ids):].tolist()
    if len(new_ids) != max_new_tokens:
        raise RuntimeError(f"generate returned {len(new_ids)} tokens, wanted {max_new_tokens}")
    step_logits = torch.stack([l[0] for l in out.logits]).float()  # [n, vocab], unprocessed
    if step_logits.argmax(-1).tolist() != new_ids:
        raise RuntimeError("greedy ids are not the argmax of the recorded step logits")
    top2 = step_logits.topk(2, dim=-1).values
    margins = (top2[:, 0] - top2[:, 1]).tolist()

    # Cache-less forward over prompt + continuation[:-1]: position T-1+i must reproduce step i.
    full = torch.tensor([prompt_ids + new_ids[:-1]], dtype=torch.long)
    with torch.no_grad():
        full_logits = model(full).logits[0].float()
    ref = full_logits[len(prompt_ids) - 1:]
    diff = (ref - step_logits).abs().max().item()
    return {
        "greedy_ids": new_ids,
        "step_logits": step_logits.numpy(),
        "min_top1_top2_margin": min(margins),
        "decode_vs_full_forward_max_abs_diff": diff,
    }
