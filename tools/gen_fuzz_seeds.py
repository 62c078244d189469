#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets under tests/fuzz/corpus/<target>/.

Seeds are small valid (and a few nearly valid) inputs derived from the golden
data, so the fuzzers start from inputs that reach deep into each parser:
  gguf          metadata of each golden MoE GGUF (config + tokenizer) with a few
                tiny tensors of every supported type, plus tests/golden/gguf/tiny_v3.gguf,
                and a vocabulary-only SentencePiece GGUF (tokenizer.ggml.model = llama)
  safetensors   small files with every supported dtype and __metadata__
  hf_config     the golden config.json files and the reference configs
  tokenizer     golden tokenizer corpus strings, one per tokenizer selector
  chat_template encoded conversations (see fuzz_chat_template.cc's byte layout)
  request       OpenAI request bodies, valid and invalid
  tokenizer_json reduced golden tokenizer.json files (a few hundred tokens each):
                byte-level BPE, SentencePiece BPE (Metaspace, and the legacy
                Prepend+Replace normalizer), DeepSeek-V3's Split sequence, and a
                catastrophic Split pattern
  tiktoken      tiktoken-style folders (fuzz_tiktoken.cc's layout): the 256 byte
                tokens and merged ones, tokenizer_config.json's added tokens and
                tokenization_kimi.py's pat_str; a few nearly valid ones
  gbnf          the grammars of tests/golden/chat/gbnf/ (a walk seed byte, then the text)
                and a few invalid ones
Every target also gets expansion recipes (tests/fuzz/fuzz_input.h): a few
bytes that stand for a document of up to its cap, e.g. a million `{},`.
Run from the repository root: python3 tools/gen_fuzz_seeds.py
"""
import hashlib
import json
import os
import random
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "golden")
OUT = os.path.join(ROOT, "tests", "fuzz", "corpus")


def write(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- GGUF ------------------------------------------------------------------

def gguf_string(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gguf_kv_section(path):
    """The raw bytes of the metadata section of a GGUF v3 file and its count."""
    with open(path, "rb") as f:
        data = f.read()
    magic, version, n_tensors, n_kv = struct.unpack_from("<IIQQ", data, 0)
    assert magic == 0x46554747 and version == 3
    pos = 24
    scalar = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip_value(pos, t):
        if t == 8:
            (n,) = struct.unpack_from("<Q", data, pos)
            return pos + 8 + n
        if t == 9:
            et, count = struct.unpack_from("<IQ", data, pos)
            pos += 12
            for _ in range(count):
                pos = skip_value(pos, et)
            return pos
        return pos + scalar[t]

    for _ in range(n_kv):
        (klen,) = struct.unpack_from("<Q", data, pos)
        pos += 8 + klen
        (t,) = struct.unpack_from("<I", data, pos)
        pos = skip_value(pos + 4, t)
    return data[24:pos], n_kv


# (ggml type id, elements per block, bytes per block)
GGML_TYPES = {"f32": (0, 1, 4), "f16": (1, 1, 2), "q4_0": (2, 32, 18), "q4_1": (3, 32, 20),
              "q8_0": (8, 32, 34), "q4_k": (12, 256, 144), "q5_k": (13, 256, 176),
              "q6_k": (14, 256, 210), "bf16": (30, 1, 2), "i32": (26, 1, 4)}


def gguf_file(kv_bytes, n_kv, tensors, alignment=32):
    """tensors: list of (name, type name, ne list innermost-first)."""
    rng = random.Random(len(tensors) * 7 + n_kv)
    infos, blobs, offset = b"", [], 0
    for name, tname, ne in tensors:
        tid, block, bbytes = GGML_TYPES[tname]
        n = 1
        for x in ne:
            n *= x
        size = n // block * bbytes
        infos += gguf_string(name) + struct.pack("<I", len(ne)) + b"".join(
            struct.pack("<Q", x) for x in ne) + struct.pack("<IQ", tid, offset)
        blob = bytes(rng.randrange(256) for _ in range(size))
        if tname in ("f16", "q4_0", "q4_1", "q8_0"):  # keep f16 scales finite and small
            blob = bytearray(blob)
            for i in range(0, size, bbytes):
                blob[i:i + 2] = struct.pack("<e", 0.01)
            blob = bytes(blob)
        pad = (-size) % alignment
        blobs.append(blob + b"\0" * pad)
        offset += size + pad
    head = struct.pack("<IIQQ", 0x46554747, 3, len(tensors), n_kv) + kv_bytes + infos
    head += b"\0" * ((-len(head)) % alignment)
    return head + b"".join(blobs)


def gguf_seeds():
    with open(os.path.join(GOLDEN, "gguf", "tiny_v3.gguf"), "rb") as f:
        write("gguf", "tiny_v3.gguf", f.read())
    tensors = [("token_embd.weight", "f32", [8, 4]), ("blk.0.attn_norm.weight", "f16", [8]),
               ("blk.0.ffn_up.weight", "q8_0", [32, 2]), ("blk.0.ffn_down.weight", "q4_0", [32]),
               ("blk.0.ffn_gate.weight", "q4_1", [32]), ("blk.0.attn_q.weight", "q4_k", [256]),
               ("blk.0.attn_k.weight", "q5_k", [256]), ("blk.0.attn_v.weight", "q6_k", [256]),
               ("blk.0.attn_output.weight", "bf16", [4, 2]), ("ids", "i32", [3])]
    moe = os.path.join(GOLDEN, "moe_gguf")
    for name in sorted(os.listdir(moe)):
        if not name.endswith(".gguf"):
            continue
        kv, n_kv = gguf_kv_section(os.path.join(moe, name))
        if len(kv) > 64 << 10:
            continue  # a real 32,000-token vocabulary: sentencepiece_vocab.gguf is its small form
        write("gguf", name.replace(".gguf", "_meta.gguf"), gguf_file(kv, n_kv, tensors))
    # Nearly valid: metadata only, and one tensor past the end of the file.
    kv, n_kv = gguf_kv_section(os.path.join(moe, "mixtral.gguf"))
    write("gguf", "metadata_only.gguf", gguf_file(kv, n_kv, []))
    whole = gguf_file(b"", 0, tensors[:2])
    write("gguf", "truncated_data.gguf", whole[:-16])
    write("gguf", "sentencepiece_vocab.gguf", sentencepiece_vocab_gguf())


def gguf_kv(key, type_id, payload):
    return gguf_string(key) + struct.pack("<I", type_id) + payload


def gguf_array(type_id, items):
    """items: already-packed elements of GGUF type type_id."""
    return struct.pack("<IQ", type_id, len(items)) + b"".join(items)


def sentencepiece_vocab_gguf():
    """tokenizer.ggml.model = llama with the first 400 Mixtral tokens (control,
    the 256 <0xNN> byte tokens, pieces with the ▁ marker), their scores and
    types, as llama.cpp's converter writes them; no tensors."""
    with open(os.path.join(GOLDEN, "tokenizer", "mixtral.tokenizer.json"), encoding="utf-8") as f:
        vocab = json.load(f)["model"]["vocab"]
    tokens = sorted((i, t) for t, i in vocab.items() if i < 400)
    # Token types: 1 normal, 2 unknown, 3 control, 6 byte (llama.cpp's enum).
    def token_type(i, t):
        return 2 if i == 0 else 3 if i < 3 else 6 if t.startswith("<0x") else 1
    kvs = [
        gguf_kv("general.architecture", 8, gguf_string("llama")),
        gguf_kv("tokenizer.ggml.model", 8, gguf_string("llama")),
        gguf_kv("tokenizer.ggml.tokens", 9, gguf_array(8, [gguf_string(t) for _, t in tokens])),
        gguf_kv("tokenizer.ggml.scores", 9,
                gguf_array(6, [struct.pack("<f", -float(i)) for i, _ in tokens])),
        gguf_kv("tokenizer.ggml.token_type", 9,
                gguf_array(5, [struct.pack("<i", token_type(i, t)) for i, t in tokens])),
        gguf_kv("tokenizer.ggml.bos_token_id", 4, struct.pack("<I", 1)),
        gguf_kv("tokenizer.ggml.eos_token_id", 4, struct.pack("<I", 2)),
        gguf_kv("tokenizer.ggml.unknown_token_id", 4, struct.pack("<I", 0)),
        gguf_kv("tokenizer.ggml.add_space_prefix", 7, b"\x01"),
        gguf_kv("tokenizer.ggml.add_bos_token", 7, b"\x01"),
    ]
    return gguf_file(b"".join(kvs), len(kvs), [])


# ---- safetensors -------------------------------------------------------------

def safetensors_file(tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    sizes = {"F32": 4, "F16": 2, "BF16": 2, "I32": 4}
    for name, dtype, shape in tensors:
        n = 1
        for x in shape:
            n *= x
        size = n * sizes[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        blobs.append(bytes((i * 37 + len(name)) % 256 for i in range(size)))
        offset += size
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((-len(text)) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def safetensors_seeds():
    write("safetensors", "all_dtypes.safetensors", safetensors_file(
        [("a", "F32", [2, 3]), ("b", "F16", [4]), ("c", "BF16", [1, 1, 2]), ("d", "I32", [2])],
        {"format": "pt"}))
    write("safetensors", "scalar_and_empty.safetensors", safetensors_file(
        [("s", "F32", []), ("e", "F16", [0, 5])]))
    write("safetensors", "llama_names.safetensors", safetensors_file(
        [("model.embed_tokens.weight", "BF16", [4, 2]),
         ("model.layers.0.mlp.experts.0.down_proj.weight", "BF16", [2, 2]),
         ("model.norm.weight", "F32", [2])]))
    write("safetensors", "header_only.safetensors", safetensors_file([]))


# ---- config.json, tokenizer, chat template, request --------------------------

def config_seeds():
    seen = set()
    for folder in sorted(os.listdir(os.path.join(GOLDEN, "moe"))) + ["../llama_tiny"]:
        p = os.path.join(GOLDEN, "moe", folder, "config.json")
        if os.path.exists(p):
            data = open(p, "rb").read()
            if hashlib.sha1(data).digest() not in seen:
                seen.add(hashlib.sha1(data).digest())
                write("hf_config", os.path.basename(os.path.normpath(folder)) + ".json", data)
    for name in sorted(os.listdir(os.path.join(GOLDEN, "configs"))):
        if name != "parameter_counts.json":
            write("hf_config", "ref_" + name, open(os.path.join(GOLDEN, "configs", name), "rb").read())


def tokenizer_seeds():
    corpus = json.load(open(os.path.join(GOLDEN, "tokenizer", "corpus.json")))
    texts = corpus if isinstance(corpus, list) else corpus.get("strings", corpus.get("texts", []))
    texts = [t for t in texts if isinstance(t, str)]
    picked = texts[::max(1, len(texts) // 24)][:24]
    for i, text in enumerate(picked):
        selector = i % 5 | (0x40 if i % 3 == 0 else 0)
        write("tokenizer", "text_%02d" % i, bytes([selector]) + text.encode())
    write("tokenizer", "special", bytes([0x40]) + b"<|im_start|>user\nhi<|im_end|>")
    write("tokenizer", "invalid_utf8", bytes([1]) + b"caf\xc3 \xff\xfe \xe4\xb8")
    ids = struct.pack("<8i", 0, 1, 17, 200, 255, 49151, -1, 1 << 30)
    for sel in range(5):
        write("tokenizer", "ids_%d" % sel, bytes([0x80 | sel]) + ids)


def reader_string(s, max_len):
    """Encodes s for ByteReader::String(max_len): 2 length bytes then the bytes."""
    b = s.encode() if isinstance(s, str) else s
    assert len(b) <= max_len
    return struct.pack("<H", len(b)) + b


def chat_seeds():
    convs = [
        [("system", "You are helpful."), ("user", "Hello!"), ("assistant", "Hi <think>x</think> there")],
        [("user", "What is 2+2?"), ("assistant", "<think>\nadd\n</think>\n\n4"), ("user", "thanks")],
        [("tool", "{\"r\": 1}"), ("tool", "more"), ("user", "ok")],
        [("user", "  \u3000 spaces \n"), ("assistant", "</think></think><think>")],
    ]
    roles = ["system", "user", "assistant", "tool"]
    for kind in range(3):
        for i, conv in enumerate(convs):
            out = bytes([kind, 0]) + bytes([i & 1])
            for role, content in conv:
                out += bytes([1]) + bytes([roles.index(role), 0]) + reader_string(content, 4096)
            write("chat_template", "k%d_c%d" % (kind, i), out)
    write("chat_template", "odd_role", bytes([0, 0, 1, 0]) + reader_string("ro\nle", 16) +
          reader_string(b"\xff\xfe<|im_end|>", 4096))


def request_seeds():
    bodies = {
        "chat_basic": (1, {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}),
        "chat_full": (1, {"messages": [{"role": "system", "content": "Be brief."},
                                       {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                                       {"role": "assistant", "content": None}],
                          "max_tokens": 8, "temperature": 0.7, "top_p": 0.9, "top_k": 40,
                          "min_p": 0.05, "seed": 42, "stop": ["\n", "END"], "stream": True,
                          "stream_options": {"include_usage": True}, "logprobs": True,
                          "top_logprobs": 3, "n": 1, "response_format": {"type": "text"}}),
        "completion_text": (0, {"prompt": "The capital of France is", "max_tokens": 16, "logprobs": 2,
                                "echo": False, "best_of": 1, "ignore_eos": True}),
        "completion_ids": (0, {"prompt": [1, 2, 3, 49151], "max_completion_tokens": 4}),
        "completion_batch": (0, {"prompt": [[5, 6, 7]], "stop": "x"}),
        "bad_types": (1, {"messages": "no", "max_tokens": -1, "temperature": "hot"}),
        "bad_ids": (0, {"prompt": [-1, 49152, 4294967296]}),
        "unsupported": (1, {"messages": [{"role": "user", "content": "x"}], "n": 2,
                            "logit_bias": {"1": 5}, "tools": [{"type": "function"}]}),
    }
    for name, (chat, body) in bodies.items():
        write("request", name, bytes([chat]) + json.dumps(body).encode())
    write("request", "deep", bytes([1]) + b'{"messages":' + b"[" * 40 + b"]" * 40 + b"}")
    write("request", "not_json", bytes([0]) + b'{"prompt": "x",')
    write("request", "dup_key", bytes([0]) + b'{"prompt": "a", "prompt": "b"}')


def tokenizer_json_seeds():
    """Each golden tokenizer.json cut to its first ids, with the merges among them."""
    for name in ("smollm2_small", "llama3", "qwen2", "glm4", "gpt2_flags"):
        path = os.path.join(GOLDEN, "tokenizer", name + ".tokenizer.json")
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            t = json.load(f)
        vocab = {k: v for k, v in t["model"]["vocab"].items() if v < 320}
        merges = []
        for m in t["model"].get("merges", []):
            a, b = m.split(" ", 1) if isinstance(m, str) else m
            if a in vocab and b in vocab and a + b in vocab:
                merges.append(m)
        t["model"]["vocab"] = vocab
        t["model"]["merges"] = merges
        n = len(vocab)
        t["added_tokens"] = [dict(a, id=n + i) for i, a in enumerate(t.get("added_tokens", [])[:4])]
        write("tokenizer_json", name, json.dumps(t, ensure_ascii=False))
        if name == "llama3":
            # DeepSeek-V3's pre-tokenizer (three Splits, then ByteLevel without
            # its regex), and a catastrophic pattern the regex limits must stop.
            t["pre_tokenizer"] = DEEPSEEK_V3_PRE_TOKENIZER
            write("tokenizer_json", "deepseek_v3_splits", json.dumps(t, ensure_ascii=False))
            t["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": "Isolated",
                 "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                 "use_regex": False}]}
            write("tokenizer_json", "catastrophic_split", json.dumps(t, ensure_ascii=False))
    sentencepiece_json_seeds()


# DeepSeek-V3's tokenizer.json pre_tokenizer, as the real file has it.
DEEPSEEK_V3_PRE_TOKENIZER = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": False},
    {"type": "Split", "pattern": {"Regex": "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"},
     "behavior": "Isolated", "invert": False},
    {"type": "Split", "pattern": {"Regex":
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
        "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
     "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}


def sentencepiece_json_seeds():
    """Mixtral's tokenizer.json cut to its first 400 ids (control, byte and ▁
    pieces), in the current layout (Metaspace) and the legacy one
    (Prepend + Replace normalizer, no pre-tokenizer)."""
    with open(os.path.join(GOLDEN, "tokenizer", "mixtral.tokenizer.json"), encoding="utf-8") as f:
        t = json.load(f)
    vocab = {k: v for k, v in t["model"]["vocab"].items() if v < 400}
    merges = []
    for m in t["model"]["merges"]:
        a, b = m.split(" ", 1) if isinstance(m, str) else m
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(m)
    t["model"]["vocab"] = vocab
    t["model"]["merges"] = merges
    write("tokenizer_json", "mixtral_metaspace", json.dumps(t, ensure_ascii=False))
    t["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "\u2581"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
    t["pre_tokenizer"] = None
    write("tokenizer_json", "mixtral_legacy", json.dumps(t, ensure_ascii=False))


# ---- tiktoken folder ---------------------------------------------------------

# Kimi K2's pat_str parts (tokenization_kimi.py), as tools/gen_real_tokenizer_golden.py has them.
KIMI_PAT_PARTS = [
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
]


def tiktoken_input(flags, config, source, text, model):
    """fuzz_tiktoken.cc's layout: flags, config, source, then the text and the
    model file, the one flag 8 names last (the rest of the input)."""
    head = bytes([flags]) + reader_string(config, 0xFFFF) + reader_string(source, 0xFFFF)
    if flags & 8:
        return head + reader_string(model, 0xFFFF) + text
    return head + reader_string(text, 0xFFFF) + model


def tiktoken_seeds():
    import base64
    tokens = [bytes([b]) for b in range(256)]
    for word in ("he", "ll", "llo", "hello", " h", " w", "or", " wor", " world", "in", "ing",
                 "\u4f60".encode(), "\u4f60\u597d".encode(), "  ", "\n\n", "12", "123"):
        w = word.encode() if isinstance(word, str) else word
        if w not in tokens:
            tokens.append(w)
    model = b"".join(base64.b64encode(t) + b" %d\n" % i for i, t in enumerate(tokens))
    n = len(tokens)
    config = json.dumps({
        "added_tokens_decoder": {
            str(n): {"content": "[BOS]", "special": True},
            str(n + 1): {"content": "[EOS]", "special": True},
            str(n + 2): {"content": "<|im_end|>", "special": True},
            str(n + 22): {"content": "<think>", "special": False, "lstrip": False, "rstrip": False},
        },
        "bos_token": "[BOS]", "eos_token": "[EOS]", "add_bos_token": True,
        "chat_template": "{% for m in messages %}{{ m.content }}<|im_end|>{% endfor %}"})
    source = ("num_reserved_special_tokens = 256\n"
              "pat_str = \"|\".join(\n    [\n" +
              "".join('        r"""' + p + '""",\n' for p in KIMI_PAT_PARTS) + "    ]\n)\n")
    text = "Hello world <|im_end|>\u4f60\u597d 12345  <think>x \xff".encode("utf-8", "surrogateescape")
    write("tiktoken", "kimi_folder", tiktoken_input(7, config, source, text, model))
    write("tiktoken", "model_only", tiktoken_input(0, "", "", "hello  world\n\n", model))
    write("tiktoken", "no_reserved", tiktoken_input(
        3, config, source.replace("256", "0"), "hello", model))
    write("tiktoken", "bad_pattern", tiktoken_input(
        2, "", 'pat_str = "|".join([r"""(a+)+$""", r"""[""",])', "aaaaaaaaaaaaaaaaaaaaaaaaab", model))
    write("tiktoken", "crlf", tiktoken_input(0, "", "", "x", model.replace(b"\n", b"\r\n")))
    write("tiktoken", "bad_base64", tiktoken_input(0, "", "", "x", model + b"YQ= 999\n"))
    write("tiktoken", "rank_gap", tiktoken_input(0, "", "", "x", model + b"YWJj 5000\n"))
    # Large inputs from a few bytes: a million-line model file (the repeated
    # rank stops it early), and 384-512 KiB runs of one character class
    # through the Kimi pattern (fuzz_input.h's recipes). Linear: 1 MiB of
    # spaces takes ~0.65 s of CPU under ASan at -O1, 256 KiB ~0.16 s; half a
    # MiB leaves the 1 s budget room for what the fuzzer adds.
    line = b"QQ== 0\n"
    head = tiktoken_input(0, "", "", "x", b"")
    write("tiktoken", "expand_lines",
          bytes([0xA5, 17]) + struct.pack("<HH", len(head), len(head) + len(line)) + head + line)
    for name, unit in (("expand_spaces", b" "), ("expand_han", "\u4f60".encode()),
                       ("expand_digits", b"7"), ("expand_punct", b"!"), ("expand_letters", b"a")):
        head = tiktoken_input(8 | 2, "", source, b"", model)
        write("tiktoken", name, bytes([0xA5, 19 if len(unit) == 1 else 17]) +
              struct.pack("<HH", len(head), len(head) + len(unit)) + head + unit)


def recipe(prefix, unit, suffix, exponent):
    """An expansion recipe (fuzz_input.h): prefix + unit * 2^exponent + suffix."""
    body = prefix.encode() + unit.encode() + suffix.encode()
    a = len(prefix.encode())
    b = a + len(unit.encode())
    return bytes([0xA5, exponent]) + struct.pack("<HH", a, b) + body


def expansion_seeds():
    # The request and tokenizer targets read a selector byte first: it leads the prefix.
    write("request", "expand_objects",
          recipe('\x00{"prompt":"x","max_tokens":1,"a":[', '{},', '{}]}', 18))
    write("request", "expand_messages",
          recipe('\x01{"messages":[', '{"role":"user","content":"x"},',
                 '{"role":"user","content":"y"}]}', 14))
    write("hf_config", "expand_objects",
          recipe('{"model_type":"llama","hidden_size":64,"x":[', '{},', '{}]}', 18))
    write("hf_config", "expand_layers",
          recipe('{"model_type":"glm4_moe","num_hidden_layers":4,"mlp_layer_types":[',
                 '"dense",', '"dense"]}', 12))
    header = '{"t":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}'
    st = recipe(header, ',"u":{"dtype":"F32","shape":[],"data_offsets":[0,4]}', "}", 14)
    write("safetensors", "expand_header", st)
    write("tokenizer_json", "expand_vocab",
          recipe('{"model":{"type":"BPE","vocab":{"a":0,', '"b":1,', '"c":2},"merges":[]},'
                 '"pre_tokenizer":{"type":"ByteLevel","use_regex":true}}', 17))
    write("tokenizer_json", "expand_merges",
          recipe('{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":[',
                 '"a b",', '"a b"]},"pre_tokenizer":{"type":"ByteLevel","use_regex":true}}', 17))
    write("tokenizer", "expand_letters", recipe("\x00x", "a", "!", 17))
    write("chat_template", "expand_content", recipe("\x00\x01", "\x10\x00" + "hello " * 2, "", 10))
    kv = gguf_string("general.architecture") + struct.pack("<I", 8) + gguf_string("llama")
    tokens = gguf_string("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 1 << 16)
    gguf_head = struct.pack("<IIQQ", 0x46554747, 3, 0, 2) + kv + tokens
    unit = gguf_string("")
    body = gguf_head + unit
    write("gguf", "expand_empty_strings",
          bytes([0xA5, 16]) + struct.pack("<HH", len(gguf_head), len(body)) + body)


def gbnf_seeds():
    folder = os.path.join(GOLDEN, "chat", "gbnf")
    for i, name in enumerate(sorted(os.listdir(folder))):
        if name.endswith(".gbnf"):
            text = open(os.path.join(folder, name), "rb").read()
            write("gbnf", name[:-5], bytes([i * 37 % 256]) + text)
    for name, text in [("left_recursion", 'root ::= root "a" | "b"'),
                       ("undefined", "root ::= x"),
                       ("unterminated", 'root ::= "abc'),
                       ("nested", "root ::= " + "(" * 70 + '"a"' + ")" * 70)]:
        write("gbnf", name, b"\x07" + text.encode())


def main():
    gbnf_seeds()
    tokenizer_json_seeds()
    tiktoken_seeds()
    expansion_seeds()
    gguf_seeds()
    safetensors_seeds()
    config_seeds()
    tokenizer_seeds()
    chat_seeds()
    request_seeds()


if __name__ == "__main__":
    sys.exit(main())
