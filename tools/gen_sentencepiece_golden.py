#!/usr/bin/env python3
"""Golden data for the SentencePiece-style BPE (issue 47, part B): the real
Mixtral-8x7B / Mistral-7B v0.1 tokenizer and HF `tokenizers` ids for the whole
shared corpus (tests/golden/tokenizer/corpus_large.json).

Source files (checked by SHA-256 before anything is written):
  tokenizer.model  Mistral's v1 SentencePiece model, the tokenizer of Mistral-7B
                   v0.1 and Mixtral-8x7B (mistral-common ships it as
                   src/mistral_common/data/tokenizer.model.v1; the HF repos
                   mistralai/Mistral-7B-Instruct-v0.1 and Mixtral-8x7B-Instruct-v0.1
                   carry the same file, LFS oid dadfd56d...)
  tokenizer.json   mistralai/Mistral-7B-Instruct-v0.1 as of its commit "Align
                   tokenizer with mistral-common (#120)": Metaspace pre-tokenizer
                   (prepend_scheme first), no normalizer
  legacy           the same repo's tokenizer.json before #120 (commit 4464348):
                   normalizer Sequence[Prepend("▁"), Replace(" ", "▁")], no
                   pre-tokenizer; same vocabulary, merges, added tokens, decoder
  tokenizer_config.json  the #120 one (chat template, add_bos_token)
A public GitHub mirror of that HF repository (with history, tokenizer.model
as an LFS pointer only) is Nymiera/Aelan; --mirror takes its git directory,
--mistral-common that of mistralai/mistral-common (for tokenizer.model).

Writes under tests/golden/tokenizer/:
  mixtral.tokenizer.json, mixtral.tokenizer_config.json, mixtral.tokenizer.model
  mixtral.vocab.gguf      vocabulary-only GGUF written from tokenizer.model with
                          the gguf package, in the layout of llama.cpp's
                          converter (_set_vocab_sentencepiece): tokenizer.ggml.model
                          llama, pre default, tokens / scores / token_type from
                          sentencepiece, tokens named in tokenizer_config.json's
                          added_tokens_decoder as CONTROL with score -1000, then
                          gguf.SpecialVocab (bos/eos/unk ids, add_bos/add_eos,
                          chat template); no tensors
  mixtral.golden.json     per corpus string: HF ids with special tokens parsed
                          ("ids"), and only where they differ from the obvious:
                          "ids_no_special" (specials as text), "decoded" (when
                          decode(ids) != the text), "skip" (decode skipping
                          specials, when != decoded), "legacy" (the legacy
                          file's ids, when != ids; "legacy_decoded" their
                          decode when != the text); "chat": conversations
                          rendered with the real chat template by jinja2 in
                          transformers' environment (tools/gen_chat_template_golden.py)
                          and their ids (specials parsed, no extra BOS) under
                          the current and the legacy pipeline ("legacy_ids": what
                          llama.cpp's GGUF pipeline gives, a space prefixed after <s>)

Usage: /work/venv-ref/bin/python tools/gen_sentencepiece_golden.py --mirror AELAN_GIT_DIR \
           --mistral-common MISTRAL_COMMON_GIT_DIR
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

import gguf
import jinja2
import sentencepiece
import tokenizers
from tokenizers import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "tokenizer")

SOURCES = {  # name -> (commit, path in the mirror, sha256)
    "tokenizer.json": ("e89c48e", "tokenizer.json",
                       "11c08db21487c885d8c792180f0be237f6a261b89a46f128a6a80a3aa4bd1720"),
    "legacy.tokenizer.json": ("4464348", "tokenizer.json",
                              "fc4f0bd70b3709312d9d1d9e5ba674794b6bc5abc17429897a540f93882f25fc"),
    "tokenizer_config.json": ("e89c48e", "tokenizer_config.json", None),
}
MODEL_SOURCE = ("dde00bc", "src/mistral_common/data/tokenizer.model.v1",
                "dadfd56d766715c61d2ef780a525ab43b8e6da4de6865bda3d95fdef5e134055")


def git_blob(mirror, name, commit, path, sha):
    data = subprocess.run(["git", "-C", mirror, "show", f"{commit}:{path}"], check=True,
                          capture_output=True).stdout
    digest = hashlib.sha256(data).hexdigest()
    if sha is not None and digest != sha:
        sys.exit(f"{name}: sha256 {digest}, expected {sha}")
    return data


def read_sources(mirror, mistral_common):
    out = {name: git_blob(mirror, name, *where) for name, where in SOURCES.items()}
    out["tokenizer.model"] = git_blob(mistral_common, "tokenizer.model", *MODEL_SOURCE)
    return out


def check_legacy_differs_only_in_normalization(current, legacy):
    a, b = json.loads(current), json.loads(legacy)
    for key in ("added_tokens", "decoder", "post_processor"):
        assert a[key] == b[key], key
    for key in ("vocab", "merges", "byte_fallback", "fuse_unk", "unk_token"):
        assert a["model"][key] == b["model"][key], key
    assert b["pre_tokenizer"] is None and a["normalizer"] is None
    return b["normalizer"]


def write_vocab_gguf(model_bytes, config_bytes, tokenizer_json_bytes, path):
    sp = sentencepiece.SentencePieceProcessor(model_proto=model_bytes)
    n = sp.vocab_size()
    tokens, scores, types = [], [], []
    for i in range(n):
        tokens.append(sp.IdToPiece(i).encode("utf-8"))
        scores.append(sp.GetScore(i))
        t = gguf.TokenType.NORMAL
        if sp.IsUnknown(i):
            t = gguf.TokenType.UNKNOWN
        elif sp.IsControl(i):
            t = gguf.TokenType.CONTROL
        elif sp.IsUnused(i):
            t = gguf.TokenType.UNUSED
        elif sp.IsByte(i):
            t = gguf.TokenType.BYTE
        types.append(t)
    config = json.loads(config_bytes)
    for key, entry in config.get("added_tokens_decoder", {}).items():
        i = int(key)
        tokens[i] = entry["content"].encode("utf-8")
        scores[i] = -1000.0
        types[i] = gguf.TokenType.CONTROL if entry.get("special") else gguf.TokenType.USER_DEFINED
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name("Mixtral-8x7B-Instruct-v0.1 vocabulary")
    writer.add_tokenizer_model("llama")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "tokenizer_config.json"), "wb") as f:
            f.write(config_bytes)
        with open(os.path.join(tmp, "tokenizer.json"), "wb") as f:
            f.write(tokenizer_json_bytes)
        gguf.SpecialVocab(tmp, n_vocab=n).add_to_gguf(writer)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def encode(tok, text, special):
    tok.encode_special_tokens = not special
    ids = tok.encode(text, add_special_tokens=False).ids
    tok.encode_special_tokens = False
    return ids


def golden_cases(tok, legacy, texts):
    cases = []
    for text in texts:
        case = {}

        def put(key, value, unless):  # each key only where it differs from its fallback
            if value != unless:
                case[key] = value
            return value

        ids = put("ids", encode(tok, text, True), None)
        put("ids_no_special", encode(tok, text, False), ids)
        decoded = put("decoded", tok.decode(ids, skip_special_tokens=False), text)
        put("skip", tok.decode(ids, skip_special_tokens=True), decoded)
        legacy_ids = put("legacy", encode(legacy, text, True), ids)
        put("legacy_decoded", legacy.decode(legacy_ids, skip_special_tokens=False), text)
        put("legacy_no_special", encode(legacy, text, False), legacy_ids)
        cases.append(case)
    return cases


CONVERSATIONS = [
    [{"role": "user", "content": "Hello, who are you?"}],
    [{"role": "system", "content": "Answer in one word."},
     {"role": "user", "content": "Capital of France?"},
     {"role": "assistant", "content": "Paris"},
     {"role": "user", "content": "Of Japan? 日本の首都"}],
    [{"role": "user", "content": "  spaces\n\nand\ttabs "}],
]


def chat_cases(tok, legacy, config):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from gen_chat_template_golden import compile_template
    template = compile_template(config["chat_template"])
    cases = []
    for messages in CONVERSATIONS:
        text = template.render(messages=messages, add_generation_prompt=True,
                               bos_token=config["bos_token"], eos_token=config["eos_token"])
        cases.append({"messages": messages, "prompt": text, "ids": encode(tok, text, True),
                      "legacy_ids": encode(legacy, text, True)})
    return cases


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mirror", required=True, help="git directory of the HF repo mirror")
    parser.add_argument("--mistral-common", required=True,
                        help="git directory of github.com/mistralai/mistral-common")
    args = parser.parse_args()
    src = read_sources(args.mirror, args.mistral_common)
    legacy_normalizer = check_legacy_differs_only_in_normalization(
        src["tokenizer.json"], src["legacy.tokenizer.json"])
    for name in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model"):
        with open(os.path.join(OUT, "mixtral." + name), "wb") as f:
            f.write(src[name])
    write_vocab_gguf(src["tokenizer.model"], src["tokenizer_config.json"], src["tokenizer.json"],
                     os.path.join(OUT, "mixtral.vocab.gguf"))
    with open(os.path.join(OUT, "corpus_large.json")) as f:
        texts = [c["text"] for c in json.load(f)["cases"]]
    tok = Tokenizer.from_str(src["tokenizer.json"].decode("utf-8"))
    legacy = Tokenizer.from_str(src["legacy.tokenizer.json"].decode("utf-8"))
    cases = golden_cases(tok, legacy, texts)
    golden = {"tokenizers": tokenizers.__version__, "sentencepiece": sentencepiece.__version__,
              "jinja2": jinja2.__version__, "legacy_normalizer": legacy_normalizer,
              "chat": chat_cases(tok, legacy, json.loads(src["tokenizer_config.json"])), "cases": cases}
    with open(os.path.join(OUT, "mixtral.golden.json"), "w") as f:
        json.dump(golden, f, ensure_ascii=True, separators=(",", ":"))
    print("wrote", len(cases), "cases;",
          sum("legacy" in c for c in cases), "differ under the legacy normalizer;",
          sum("decoded" in c for c in cases), "decode to other text")


if __name__ == "__main__":
    sys.exit(main())
