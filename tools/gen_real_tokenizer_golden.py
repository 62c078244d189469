#!/usr/bin/env python3
"""Writes tests/golden/tokenizer/real/<name>.golden.json: the ids HF `tokenizers`
(and, for the tiktoken files, `tiktoken`) gives for the real tokenizer files that
tools/fetch_real_tokenizers.py puts in models/real-tokenizers/, on the 2,200
strings of corpus_large.json plus, per file, text around each of its added and
special tokens. tests/tokenizer/real_tokenizer_test.cc compares anymoe's ids.

Per case: "t" the text (only for the per-file strings; the corpus ones are
read from corpus_large.json by index), "i" ids with special tokens parsed,
"n" ids with special tokens as text where they differ from "i";
"bos": the ids a sequence starts with when the file's BOS handling applies
(tokenizer_config.json add_bos_token, as transformers reads it). A folder that
also has the tiktoken ranks its tokenizer.json was made from (Llama-3's
tokenizer.model) is checked against tiktoken too, which must give the same
ids on every case; "tiktoken" then holds what a tiktoken folder around those
ranks needs (base vocabulary, pattern, added tokens). o200k (gpt-oss) is
checked against tiktoken's own o200k_harmony encoding.

Usage: /work/venv-ref/bin/python tools/fetch_real_tokenizers.py
       /work/venv-ref/bin/python tools/gen_real_tokenizer_golden.py
"""

import base64
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile

import tiktoken
import tokenizers
from tokenizers import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "golden", "tokenizer")
REAL = os.path.join(ROOT, "models", "real-tokenizers")

# Kimi K2 / K2.5's pat_str (tokenization_kimi.py), as its tiktoken encoding uses it.
KIMI_PATTERN_PARTS = [
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
]
KIMI_PATTERN = "|".join(KIMI_PATTERN_PARTS)

# Kimi's tokenizer_config.json added_tokens_decoder (K2 / K2.5), as offsets
# from the base vocabulary (163,584 in Kimi) -> (content, special): the test
# writes this config into a Kimi-style folder around a real tiktoken.model.
KIMI_ADDED = {0: ("[BOS]", True), 1: ("[EOS]", True), 2: ("<|im_end|>", True),
              3: ("<|im_user|>", True), 4: ("<|im_assistant|>", True),
              6: ("<|start_header_id|>", True), 7: ("<|end_header_id|>", True),
              9: ("[EOT]", True), 10: ("<|im_system|>", True),
              11: ("<|tool_calls_section_begin|>", False),
              12: ("<|tool_calls_section_end|>", False), 13: ("<|tool_call_begin|>", False),
              14: ("<|tool_call_argument_begin|>", False), 15: ("<|tool_call_end|>", False),
              17: ("<|im_middle|>", True), 18: ("<|media_begin|>", True),
              19: ("<|media_content|>", True), 20: ("<|media_end|>", True),
              21: ("<|media_pad|>", True), 22: ("<think>", False), 23: ("</think>", False),
              254: ("[UNK]", True), 255: ("[PAD]", True)}


def around(tokens):
    out = []
    for i, t in enumerate(tokens):
        out.append(f"x {t}y")
        out.append(f"{t}\n\n{t} 12")
        if i + 1 < len(tokens):
            out.append(f"Hello{t}{tokens[i + 1]}世界 ")
    return out


def hf_golden(name, corpus):
    tok = Tokenizer.from_file(os.path.join(REAL, name, "tokenizer.json"))
    added = [a.content for a in tok.get_added_tokens_decoder().values()]
    extra = around(added)

    # What a sequence starts with: tokenizer.json's post-processor (ByteLevel in
    # these files: nothing) and, as transformers' LlamaTokenizerFast adds it,
    # tokenizer_config.json's bos_token when add_bos_token is true.
    config_path = os.path.join(REAL, name, "tokenizer_config.json")
    config = json.load(open(config_path)) if os.path.exists(config_path) else {}
    bos = config.get("bos_token")
    bos = bos.get("content") if isinstance(bos, dict) else bos
    empty = tok.encode("", add_special_tokens=True).ids
    if config.get("add_bos_token") and bos is not None:
        empty = [tok.token_to_id(bos)] + empty

    def case(text):
        tok.encode_special_tokens = False
        ids = tok.encode(text, add_special_tokens=False).ids
        assert tok.encode(text, add_special_tokens=True).ids == ids, text
        tok.encode_special_tokens = True
        as_text = tok.encode(text, add_special_tokens=False).ids
        tok.encode_special_tokens = False
        return compact(ids, as_text)

    golden = {"reference": "tokenizers " + tokenizers.__version__, "bos": empty,
              "cases": [case(t) for t in corpus] + [{"t": t, **case(t)} for t in extra]}
    ranks_path = os.path.join(REAL, name, "tokenizer.model")
    if os.path.exists(ranks_path):
        # The folder also has the tiktoken ranks the tokenizer.json was made
        # from (Llama-3): the second reference must agree with the first.
        golden["tiktoken"] = check_tiktoken_agrees(tok, ranks_path, corpus + extra, golden["cases"])
    return golden


def read_ranks(path):
    ranks = {}
    for line in open(path, "rb"):
        if line.strip():
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def split_pattern(tok):
    """The single Split regex of a tokenizer.json's pre-tokenizer Sequence."""
    pre = json.loads(tok.to_str())["pre_tokenizer"]
    splits = [p["pattern"]["Regex"] for p in pre.get("pretokenizers", []) if p["type"] == "Split"]
    assert len(splits) == 1, splits
    return splits[0]


def check_tiktoken_agrees(tok, ranks_path, texts, cases):
    """tiktoken with the file's ranks, its Split pattern and its added tokens
    gives the golden ids on every text; returns what a tiktoken folder around
    the ranks needs (the pattern, the added tokens by id)."""
    ranks = read_ranks(ranks_path)
    added = {a.content: i for i, a in tok.get_added_tokens_decoder().items()}
    enc = tiktoken.Encoding(name="ranks", pat_str=split_pattern(tok), mergeable_ranks=ranks,
                            special_tokens=added)
    for text, case in zip(texts, cases):
        assert enc.encode(text, allowed_special="all") == case["i"], text
        assert enc.encode(text, disallowed_special=()) == case.get("n", case["i"]), text
    return {"base_vocab": len(ranks), "pattern": split_pattern(tok),
            "added": {str(i): {"content": a.content, "special": a.special}
                      for i, a in sorted(tok.get_added_tokens_decoder().items())}}


def compact(ids, as_text):
    """"n" only where special tokens as text change the ids."""
    return {"i": ids} if ids == as_text else {"i": ids, "n": as_text}


def tiktoken_golden(name, corpus):
    ranks = read_ranks(os.path.join(REAL, name, "tiktoken.model"))
    base = len(ranks)
    # tokenization_kimi.py: ids [base, base + 256) are special tokens, named by
    # the config or <|reserved_token_ID|>.
    specials = {KIMI_ADDED.get(i, (f"<|reserved_token_{base + i}|>",))[0]: base + i
                for i in range(256)}
    enc = tiktoken.Encoding(name=name, pat_str=KIMI_PATTERN, mergeable_ranks=ranks,
                            special_tokens=specials)
    # transformers splits every added token out of the text first; with special
    # tokens treated as text, the non-special ones (tool-call markers, <think>)
    # still are (HF's encode_special_tokens), as anymoe does.
    plain = sorted((c for c, special in KIMI_ADDED.values() if not special), key=len, reverse=True)
    plain_re = re.compile("|".join(map(re.escape, plain)))

    def as_text(text):
        ids, at = [], 0
        for m in plain_re.finditer(text):
            ids += enc.encode_ordinary(text[at:m.start()]) + [specials[m.group(0)]]
            at = m.end()
        return ids + enc.encode_ordinary(text[at:])

    extra = around([c for c, _ in KIMI_ADDED.values()])

    def case(text):
        return compact(enc.encode(text, allowed_special="all"), as_text(text))

    return {"reference": "tiktoken " + tiktoken.__version__, "base_vocab": base,
            "added": {str(k): {"content": c, "special": s} for k, (c, s) in KIMI_ADDED.items()},
            "pattern_parts": KIMI_PATTERN_PARTS,
            "cases": [case(t) for t in corpus] + [{"t": t, **case(t)} for t in extra]}


O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"


def o200k_golden(name, corpus):
    """gpt-oss's encoding, tiktoken's own o200k_harmony (its pattern, ranks and
    special tokens), with the ranks given locally: tiktoken reads them from its
    cache and checks them against its pinned hash (no download)."""
    with tempfile.TemporaryDirectory() as cache:
        key = hashlib.sha1(O200K_URL.encode()).hexdigest()
        shutil.copyfile(os.path.join(REAL, name, "tiktoken.model"), os.path.join(cache, key))
        os.environ["TIKTOKEN_CACHE_DIR"] = cache
        enc = tiktoken.get_encoding("o200k_harmony")
        del os.environ["TIKTOKEN_CACHE_DIR"]
    base = len(enc._mergeable_ranks)
    # o200k_harmony names id 200018 twice (<|endofprompt|> from o200k_base and
    # <|reserved_200018|>); gpt-oss's tokenizer.json keeps <|endofprompt|>.
    added = {}
    for content in enc.special_tokens_set:
        i = enc.encode_single_token(content)
        if i not in added or content == "<|endofprompt|>":
            added[i] = content
    assert sorted(added) == list(range(base, max(added) + 1)), "specials not right after the ranks"
    named = [c for c in added.values() if not re.fullmatch(r"<\|reserved_\d+\|>", c)]
    extra = around(sorted(named) + ["<|reserved_200013|>", "<|reserved_201087|>"])

    def case(text):
        return compact(enc.encode(text, allowed_special="all"), enc.encode(text, disallowed_special=()))

    return {"reference": "tiktoken " + tiktoken.__version__ + " o200k_harmony",
            "base_vocab": base, "pattern": enc._pat_str,
            "added": {str(i): {"content": c, "special": True} for i, c in sorted(added.items())},
            "cases": [case(t) for t in corpus] + [{"t": t, **case(t)} for t in extra]}


def main():
    corpus = [c["text"] for c in json.load(open(os.path.join(GOLDEN, "corpus_large.json")))["cases"]]
    os.makedirs(os.path.join(GOLDEN, "real"), exist_ok=True)
    names = sys.argv[1:] or ["deepseek-v3", "deepseek-llm", "qwen-tiktoken", "llama3", "o200k"]
    for name in names:
        folder = os.path.join(REAL, name)
        if name == "o200k":
            golden = o200k_golden(name, corpus)
        elif os.path.exists(os.path.join(folder, "tokenizer.json")):
            golden = hf_golden(name, corpus)
        else:
            golden = tiktoken_golden(name, corpus)
        golden["note"] = "generated by tools/gen_real_tokenizer_golden.py"
        path = os.path.join(GOLDEN, "real", name + ".golden.json")
        with open(path, "w") as f:
            json.dump(golden, f, separators=(",", ":"), ensure_ascii=False)
        print("wrote", path, os.path.getsize(path), "bytes,", len(golden["cases"]), "cases")


if __name__ == "__main__":
    sys.exit(main())
