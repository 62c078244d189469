#!/usr/bin/env python3
"""Generates the golden tokenizer corpus for tests/tokenizer/ from HF `tokenizers`.

Writes under tests/golden/tokenizer/:
  corpus.json                 the test strings (>= 200)
  <name>.tokenizer.json       small reference tokenizers (and tokenizer_config.json)
  <name>.golden.json          ids / decoded text from HF tokenizers for every string
  smollm2_small.gguf          the smollm2_small vocabulary as GGUF metadata only
  smollm2_full.golden.json    ids from the full SmolLM2-135M vocabulary (for the
                              GGUF test that runs when models/ has the model)
  unicode_classes.json        \\p{L} / \\p{N} / \\s / Digits classes of every code
                              point as HF tokenizers' regex engine sees them

Reference tokenizers (all byte-level BPE, HF tokenizers):
  smollm2_small  SmolLM2's first 6000 merges, Digits + ByteLevel (the real
                 SmolLM2 tokenizer.json pre-tokenizer), its 17 special tokens
  llama3         trained 3k BPE, Llama-3's Split regex + ByteLevel, ignore_merges,
                 TemplateProcessing BOS, Llama-3 special tokens
  qwen2          trained 3k BPE, Qwen2's Split regex, NFC, ChatML specials and a
                 non-special <tool_call>
  gpt2_flags     smollm2_small's vocabulary with GPT-2's plain ByteLevel(use_regex)
                 pre-tokenizer and added tokens using lstrip / rstrip / single_word
  glm4           trained 3k BPE, GLM-4.x's Split regex (= Llama-3's, \\p{N}{1,3}),
                 ignore_merges, GLM specials, non-special <think> / </think>

Usage: /work/.venv-tools/bin/python tools/gen_tokenizer_golden.py [--gguf models/SmolLM2-135M-Instruct.Q4_1.gguf]
"""

import argparse
import glob
import json
import os
import sys
import tempfile

import gguf
import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "tokenizer")
TEMPLATES = os.path.join(OUT, "templates")

# Regexes exactly as in the real tokenizer.json files (llama.cpp src/llama-vocab.cpp
# quotes them as "original regex from tokenizer.json"; transformers'
# models/qwen2/tokenization_qwen2.py has PRETOKENIZE_REGEX; zai-org GLM-4.x
# tokenizer.json uses the Llama-3 / cl100k one).
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

SMOLLM2_MERGES = 6000


def corpus():
    """The test strings: every class of text the pre-tokenizers treat differently."""
    s = []
    s += ["", " ", "  ", "a", "Hello world", "Hello, world!", "hello world how are you?",
          "The quick brown fox jumps over the lazy dog.",
          "  leading and trailing  ", "multiple   internal    spaces",
          "I'm sure they'll say it's fine, don't you think? We've seen it, I'd say.",
          "IT'S THEY'LL WE'VE I'M YOU'RE HE'D DON'T", "'S 'LL 'Ve 'rE 'D 'M 'T",
          "x'ſx 'ſ ſ", "''s '''t 's's", "rock 'n' roll", "O'Neil's d'Artagnan",
          "can't won't shan't", "'", "''", "' s", "'s", "'hello'", "\"quoted\" 'single'"]
    s += ["你好，世界！这是一个测试。", "中文文本没有空格分隔词语", "我爱北京天安门 and English",
          "日本語のテキストとカタカナ ー", "ひらがな カタカナ 漢字 ｶﾀｶﾅ", "東京タワーは333メートルです。",
          "한국어 텍스트입니다", "Россия и Україна", "Ελληνικά γράμματα", "مرحبا بالعالم",
          "שלום עולם", "हिन्दी भाषा", "ภาษาไทยไม่มีช่องว่าง", "Tiếng Việt có dấu",
          "Apples are りんご 林檎 and 苹果", "Mixed中文English日本語한국어Русский"]
    s += ["Café naïve résumé façade Ångström", "e\u0301 combining acute", "n\u0303 a\u0308 o\u0302",
          "Zalgo: Z\u0335\u0321a\u0336l\u0337g\u0338o\u0334", "\u00e9 vs e\u0301", "ﬁ ligature ﬀ",
          "Ⅻ ⅻ Ⅷ roman", "²³ superscripts ¼ ½ ¾", "٠١٢٣٤٥٦٧٨٩ arabic-indic", "१२३ devanagari digits",
          "① ② ③ circled", "𝟘𝟙𝟚 math digits", "ℌ𝔢𝔩𝔩𝔬 fraktur"]
    s += ["Emoji: 😀👍🏽🇺🇸 and ❤️", "👨‍👩‍👧‍👦 family", "🏳️‍🌈 flag", "👩🏾‍💻 coder",
          "🤷‍♀️🤦🏻‍♂️", "😀😀😀😀😀", "emoji😀inside", "🇯🇵🇫🇷🇩🇪", "#️⃣ 1️⃣ keycaps", "☕ ☃ ★ ☆"]
    s += ["\t", "\n", "\r\n", "\n\n", "\n\n\n", " \n", "\n ", "a\nb", "a\r\nb", "a\n\nb",
          "a \n b", "a  \n  b", "line1\nline2\r\nline3\rline4", "\t\tindented\ttabs",
          "x  \t\ny", "  \r\n\r\n  z", "end with spaces   ", "   ", "\t \t \t", "\n\t\n\t",
          "a\u00a0b", "\u00a0\u00a0x", "x\u2028\u2028y", "a\u0085b", "a\u3000b 全角スペース",
          "a\u2009thin\u200bzero\u200dwidth", "\u180ex mongolian", "a\x0bb\x0cc", "a\x1c\x1db",
          "trailing newline\n", "\n\nleading newlines", "mixed \t\n \r\n\t end"]
    nums = ["0", "1", "12", "123", "1234", "12345", "123456", "1234567", "12345678",
            "123456789", "1234567890", "3.14159", "1,000,000", "-42", "+7", "1e10", "0x1F",
            "2024-01-15", "12:30:45", "$1,234.56", "99.9%", "v1.2.3", "192.168.0.1",
            "a1b2c3", "abc123def456", "1st 2nd 3rd 4th", "3 33 333 3333 33333",
            " 123", "  456", "x 7 y", "3333333333333333333333", "0.000001", "1/2 3/4"]
    s += nums
    s += ["def foo(x):\n    return x ** 2  # comment\n",
          "if (a && b) {\n\treturn c;\n}\n",
          "for i in range(10):\n        print(i)\n",
          "#include <stdio.h>\nint main(void) {\n  printf(\"%d\\n\", 42);\n  return 0;\n}\n",
          "const x = () => { return [1, 2, 3].map(v => v * 2); };",
          "SELECT id, name FROM users WHERE age > 18 ORDER BY name;",
          "<html><body><p class=\"x\">Hi &amp; bye</p></body></html>",
          "{\"key\": \"value\", \"list\": [1, 2, 3], \"nested\": {\"a\": null}}",
          "    four spaces\n        eight spaces\n            twelve",
          "x = a->b; y = c::d; z = e?.f ?? g;", "!!!???...---", "(parens) [brackets] {braces}",
          "snake_case camelCase PascalCase kebab-case SCREAMING_CASE",
          "https://example.com/path?q=1&r=2#frag", "user@example.com",
          "C:\\Windows\\System32", "~/home/user/.bashrc", "a+b=c; d-e*f/g",
          "```python\nprint('hi')\n```", "| a | b |\n|---|---|\n| 1 | 2 |",
          "# Heading\n\n- item 1\n- item 2\n\n> quote", "@decorator\nclass Foo(Bar):\n    pass"]
    s += ["<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n",
          "<|endoftext|>", "<|endoftext|><|endoftext|>", "text<|endoftext|>more text",
          " <|im_start|> spaced <|im_end|> ", "<|im_start|", "<|im_end|", "<|im_start|>>",
          "<<|im_start|>", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
          "<|eot_id|><|eom_id|>", "[gMASK]<sop><|system|>\nsys<|user|>\nhi<|assistant|>",
          "<think>reasoning</think>answer", "<tool_call>{\"name\": \"f\"}</tool_call>",
          "/nothink please", "<repo_name>x<file_sep>y<filename>z", "<|user|><|observation|>",
          "inline<|im_end|>tail", "[gMASK]", "<sop><eop>", "<|reserved_special_token_0|>",
          "fake <|notatoken|> here", "<|im_start|>system\nYou are helpful<|im_end|>"]
    s += ["\u00ff\u00fe\u00fd latin-1 tail", "\u0100\u0101 latin ext", "\ufeffBOM at start",
          "\ufffd replacement char", "\U0010ffff max code point", "\U0001f600\U0001f601",
          "\u200e\u200f bidi marks", "\u2066isolate\u2069", "\U000e0041 tag char",
          "\ue000 private use", "ȷ ɐ ʃ ipa", "\u0000nul\u0001ctl", "\x7fdel", "\u00ad soft hyphen",
          "ℕ ℤ ℚ ℝ ℂ ∀ ∃ ∅ ∈ ∉", "→ ← ↑ ↓ ⇒ ⇔", "© ® ™ § ¶ †", "€ £ ¥ ₹ ₿"]
    s += ["The year 2023 was followed by 2024.", "Call 555-123-4567 now!",
          "It costs €12.50 or £10.", "Ratio 16:9 and 4:3", "H2O CO2 C6H12O6",
          "MiXeD CaSe TeXt", "ALLCAPS lowercase Title Case", "a.b.c.d", "...", "--", "___",
          "don't\nstop", "it's\tfine", "we're  here", "hello'world", "test's", "TEST'S",
          "Xx'll", "A'd", "b'Re", "c'vE", "dogs' toys", "'twas the night"]
    s += ["word " * 30, "ab" * 50, "\n" * 12, " " * 17 + "x", "!" * 20, "é" * 10,
          "日本" * 15, "1" * 25, "a b " * 20, "😀" * 8]
    s += ["a <mask> b", "x  \t<mask>", "<rtok>  \n y", "<mask><mask>", " \t<mask>\n\n<rtok>\n z",
          "word words sword word. _word word_ (word)", "wordword", "1word word2 éword"]
    s += ["Ünïcödé ẞtraße", "İstanbul ıi", "ǅ ǈ ǋ titlecase", "ꓐ lisu", "𐐀𐐁 deseret",
          "ᏣᎳᎩ cherokee", "ⲁⲃⲅ coptic", "ᚠᚢᚦ runes", "ꦗꦮ javanese", "𓀀 hieroglyph"]
    return s


def unicode_classes(path):
    """Dumps, for every code point, the class HF tokenizers' regex engine gives it."""
    cps = [c for c in range(0x110000) if not (0xD800 <= c <= 0xDFFF)]
    text = "".join(map(chr, cps))

    def matching(pattern):
        removed = pre_tokenizers.Split(Regex(pattern), behavior="removed")
        kept = set()
        for piece, _ in removed.pre_tokenize_str(text):
            kept.update(map(ord, piece))
        return set(cps) - kept

    letters, numbers, spaces = matching(r"\p{L}"), matching(r"\p{N}"), matching(r"\s")
    probe = "a".join(chr(c) for c in cps if c != ord("a"))
    digits = set()
    for piece, _ in pre_tokenizers.Digits(individual_digits=True).pre_tokenize_str(probe):
        if len(piece) == 1 and piece != "a":
            digits.add(ord(piece))
    runs = []
    for c in cps:
        cls = "S" if c in spaces else "L" if c in letters else "N" if c in numbers else "O"
        if runs and runs[-1][2] == cls and runs[-1][1] == c - 1:
            runs[-1][1] = c
        else:
            runs.append([c, c, cls])
    with open(path, "w") as f:
        json.dump({"note": "code point classes of HF tokenizers' Oniguruma regex engine "
                           "(runs [first, last, L|N|S|O]) and of its Digits pre-tokenizer",
                   "tokenizers_version": tokenizers.__version__, "runs": runs,
                   "digits_numeric": sorted(digits)}, f, separators=(",", ":"))


def gguf_strings(reader, key):
    field = reader.fields[key]
    return [bytes(field.parts[i]).decode("utf-8") for i in field.data]


def gguf_scalar(reader, key):
    field = reader.fields[key]
    return field.parts[field.data[0]].tolist()[0]


def smollm2_tokenizer(tokens, merges, n_special=17):
    vocab = {t: i for i, t in enumerate(tokens)}
    bpe = models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges],
                     unk_token=None, fuse_unk=False, byte_fallback=False)
    tok = Tokenizer(bpe)
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t in tokens[:n_special]])
    return tok


def training_text():
    files = sorted(glob.glob("/usr/lib/python3*/[a-m]*.py"))[:40]
    texts = []
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            texts.append(f.read())
    texts += corpus() * 20
    texts += [" ".join(str(i) for i in range(n, n + 400)) for n in (0, 1000, 50000, 2000000)]
    return texts


def trained_tokenizer(split_regex, nfc, ignore_merges, specials, non_special, bos=None):
    tok = Tokenizer(models.BPE(unk_token=None, ignore_merges=ignore_merges))
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(split_regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=3000, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(training_text(), trainer=trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in non_special])
    if bos:
        bos_id = tok.token_to_id(bos)
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                          special_tokens=[(bos, bos_id)])])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    # The trainer does not keep ignore_merges; set it the way the real files have it.
    data = json.loads(tok.to_str())
    data["model"]["ignore_merges"] = ignore_merges
    return Tokenizer.from_str(json.dumps(data))


def golden_cases(tok, strings, with_bos=False):
    cases = []
    for text in strings:
        tok.encode_special_tokens = False
        ids = tok.encode(text, add_special_tokens=False).ids
        tok.encode_special_tokens = True
        ids_text = tok.encode(text, add_special_tokens=False).ids
        tok.encode_special_tokens = False
        case = {"ids": ids, "ids_no_special": ids_text,
                "decoded": tok.decode(ids, skip_special_tokens=False),
                "decoded_no_special": tok.decode(ids_text, skip_special_tokens=False),
                "decoded_skip_special": tok.decode(ids, skip_special_tokens=True)}
        if with_bos:
            case["ids_with_bos"] = tok.encode(text, add_special_tokens=True).ids
        cases.append(case)
    return cases


def versions():
    import transformers
    from importlib.metadata import version
    return {"tokenizers": tokenizers.__version__, "transformers": transformers.__version__,
            "gguf": version("gguf")}


def write_json(name, obj):
    with open(os.path.join(OUT, name), "w") as f:
        json.dump(obj, f, ensure_ascii=True, indent=None, separators=(",", ":"))


def write_tokenizer(name, tok, config):
    tok.save(os.path.join(OUT, f"{name}.tokenizer.json"), pretty=False)
    write_json(f"{name}.tokenizer_config.json", config)


def read_template(name):
    with open(os.path.join(TEMPLATES, name)) as f:
        return f.read()


def write_small_gguf(path, tokens, types, merges, chat_template):
    writer = gguf.GGUFWriter(path, arch="llama")
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_pad_token_id(2)
    writer.add_add_bos_token(False)
    writer.add_chat_template(chat_template)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def transformers_gguf_disagreements(gguf_path, reference, strings):
    """Encodes the corpus with transformers' own GGUF tokenizer loader."""
    from transformers import AutoTokenizer
    try:
        hf = AutoTokenizer.from_pretrained(os.path.dirname(gguf_path),
                                           gguf_file=os.path.basename(gguf_path))
    except Exception as e:  # noqa: BLE001 - report whatever transformers raised
        return {"error": f"{type(e).__name__}: {e}"}
    diffs = []
    for i, text in enumerate(strings):
        theirs = hf.encode(text, add_special_tokens=False)
        ours = reference.encode(text, add_special_tokens=False).ids
        if theirs != ours:
            diffs.append({"index": i, "text": text, "reference": ours, "transformers_gguf": theirs})
    return {"tokenizer_class": type(hf).__name__, "disagreements": len(diffs), "examples": diffs[:10]}


def long_texts():
    """Texts of thousands of pre-tokenizer pieces, most of them repeats (the
    encoder reuses a repeated piece's ids within one text), one piece over 64
    bytes; not used for training the test tokenizers."""
    return ["\n".join(corpus()) * 2,
            ("for row in rows:\n    total += price[row] * count[row]  # " + "x" * 80 + "\n") * 40]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gguf", default=os.path.join(ROOT, "models",
                                                       "SmolLM2-135M-Instruct.Q4_1.gguf"))
    args = parser.parse_args()
    os.makedirs(OUT, exist_ok=True)
    strings = corpus() + long_texts()
    assert len(strings) >= 200, len(strings)
    write_json("corpus.json", {"note": "generated by tools/gen_tokenizer_golden.py",
                               "strings": strings})
    unicode_classes(os.path.join(OUT, "unicode_classes.json"))
    meta = versions()

    reader = gguf.GGUFReader(args.gguf)
    tokens = gguf_strings(reader, "tokenizer.ggml.tokens")
    merges = gguf_strings(reader, "tokenizer.ggml.merges")
    types = [int(reader.fields["tokenizer.ggml.token_type"].parts[i][0])
             for i in reader.fields["tokenizer.ggml.token_type"].data]
    smol_template = gguf_strings(reader, "tokenizer.chat_template")[0]

    full = smollm2_tokenizer(tokens, merges)
    report = transformers_gguf_disagreements(args.gguf, full, strings)
    write_json("smollm2_full.golden.json", {
        **meta, "source": os.path.basename(args.gguf), "transformers_gguf_check": report,
        "cases": golden_cases(full, strings)})
    print("transformers GGUF loader vs reference:", {k: v for k, v in report.items()
                                                      if k != "examples"})

    n_small = 252 + SMOLLM2_MERGES  # 17 specials, 235 alphabet tokens, one token per merge
    small = smollm2_tokenizer(tokens[:n_small], merges[:SMOLLM2_MERGES])
    write_tokenizer("smollm2_small", small, {
        "bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "pad_token": "<|im_end|>",
        "add_bos_token": False, "chat_template": smol_template})
    write_small_gguf(os.path.join(OUT, "smollm2_small.gguf"), tokens[:n_small],
                     types[:n_small], merges[:SMOLLM2_MERGES], smol_template)
    write_json("smollm2_small.golden.json", {**meta, "cases": golden_cases(small, strings)})

    flags = Tokenizer.from_str(small.to_str())
    flags.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    flags.add_special_tokens([AddedToken("<mask>", special=True, lstrip=True, normalized=False)])
    flags.add_tokens([AddedToken("<rtok>", special=False, rstrip=True, normalized=False),
                      AddedToken("word", special=False, single_word=True, normalized=False)])
    write_tokenizer("gpt2_flags", flags, {"eos_token": "<|endoftext|>"})
    write_json("gpt2_flags.golden.json", {**meta, "cases": golden_cases(flags, strings)})

    llama_specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                      "<|reserved_special_token_1|>", "<|start_header_id|>", "<|end_header_id|>",
                      "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"]
    llama = trained_tokenizer(LLAMA3_REGEX, nfc=False, ignore_merges=True,
                              specials=llama_specials, non_special=[], bos="<|begin_of_text|>")
    write_tokenizer("llama3", llama, {
        "bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
        "chat_template": read_template("llama3.jinja")})
    write_json("llama3.golden.json", {**meta, "cases": golden_cases(llama, strings, True)})

    qwen = trained_tokenizer(QWEN2_REGEX, nfc=True, ignore_merges=False,
                             specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                             non_special=["<tool_call>", "</tool_call>"])
    write_tokenizer("qwen2", qwen, {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                                    "chat_template": smol_template})
    write_json("qwen2.golden.json", {**meta, "cases": golden_cases(qwen, strings)})

    glm_specials = ["<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>",
                    "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"]
    glm = trained_tokenizer(LLAMA3_REGEX, nfc=False, ignore_merges=True, specials=glm_specials,
                            non_special=["<think>", "</think>", "/nothink"])
    write_tokenizer("glm4", glm, {"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
                                  "chat_template": read_template("glm45.jinja")})
    write_json("glm4.golden.json", {**meta, "cases": golden_cases(glm, strings)})
    print("wrote", OUT, meta, len(strings), "strings")


if __name__ == "__main__":
    sys.exit(main())
