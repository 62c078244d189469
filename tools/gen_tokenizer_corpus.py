#!/usr/bin/env python3
"""Writes tests/golden/tokenizer/corpus_large.json: >= 2,000 test strings for the
tokenizers of the model family (issue 47), deterministic (seeded).

Categories: Chinese, Japanese, Korean, Arabic, Hindi, Thai, Greek/Cyrillic/Latin
with diacritics, emoji with ZWJ sequences and skin tones, combining marks (NFC
and NFD forms), code in six languages, long runs of spaces, tabs, newlines and
digits, English contractions in every letter case, numbers of every length,
mixed scripts, and text around special tokens. Invalid UTF-8 cannot sit in a
JSON string; tests/tokenizer/tokenizer_robustness_test.cc covers it.

Each string carries its category, so a failing test names what kind of text
broke.

Usage: /work/venv-ref/bin/python tools/gen_tokenizer_corpus.py
"""

import itertools
import json
import os
import random
import sys
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "tokenizer", "corpus_large.json")

SCRIPTS = {
    "chinese": ["我们今天讨论混合专家模型。", "机器学习是人工智能的一个分支", "你好，世界！",
                "中文分词没有空格", "龘龗𠀀𠀁𪚥", "北京市海淀区中关村大街27号"],
    "japanese": ["こんにちは世界", "カタカナとひらがなと漢字", "東京タワーは333メートルです。",
                 "ｶﾀｶﾅ半角", "日本語のテキスト、句読点。"],
    "korean": ["안녕하세요 세계", "한국어 텍스트입니다.", "ᄀᄁᄂ 자모", "서울특별시 123번지"],
    "arabic": ["مرحبا بالعالم", "اللغة العربية جميلة.", "٠١٢٣٤٥٦٧٨٩ أرقام", "السَّلَامُ عَلَيْكُمْ"],
    "hindi": ["नमस्ते दुनिया", "हिन्दी भाषा में पाठ।", "१२३ अंक", "क्षत्रिय ज्ञान"],
    "thai": ["สวัสดีชาวโลก", "ภาษาไทยไม่มีช่องว่างระหว่างคำ", "๑๒๓ ตัวเลข"],
    "european": ["Ünïcödé ẞtraße", "İstanbul ıi", "Ελληνικά κείμενα", "Привет, мир!",
                 "façade naïve coöperate", "Ǆǅǆ ǇǈǉǊǋǌ", "ﬁ ﬂ ligatures", "Ωmega Kelvin K Å"],
    "emoji": ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🧑🏿‍💻", "❤️‍🔥", "🇯🇵🇫🇷", "✌🏻✌🏼✌🏽✌🏾✌🏿",
              "1️⃣#️⃣", "👩‍❤️‍💋‍👨"],
    "combining": ["e\u0301", "a\u0300\u0301\u0302", "n\u0303o\u0308", "\u0915\u094d\u0937",
                  "Z\u0351\u0352\u0353a\u0354\u0355l\u0356g\u0357o", "\u0301start", "ᄒ\u1161\u11ab"],
    "symbols": ["∀x∈ℝ: x²≥0", "€100 £50 ¥1000", "→ ← ↑ ↓ ⇒", "©®™", "①②③ ⅠⅡⅢ", "½ ¾ ⅞",
                "«quotes» „Anführung“ 「括弧」", "—–‐‑", "\u00a0nbsp\u2003em\u3000ideo"],
}

CODE = [
    "def foo(x):\n    return x ** 2  # square\n",
    "for i in range(10):\n\tprint(f\"{i:03d}\")\n",
    "int main(int argc, char** argv) {\n  std::vector<int> v{1, 2, 3};\n  return 0;\n}\n",
    "fn main() {\n    let s: &str = \"hi\";\n    println!(\"{s}\");\n}\n",
    "const f = async (a, b) => { await fetch(`/api/${a}?b=${b}`); };\n",
    "func Add(a, b int) int {\n\treturn a + b\n}\n",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;\n",
    "#include <stdio.h>\n#define MAX(a,b) ((a)>(b)?(a):(b))\n",
    "x = [i*i for i in xs if i % 2 == 0]\n",
    "public static void main(String[] args) { System.out.println(\"Hi\"); }\n",
    "    if (x != nullptr && *x == '\\n') { ++count; }\n",
    "{\"key\": [1, 2.5, -3e10, true, null], \"nested\": {\"a\": \"b\"}}",
]

CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"]
WORDS = ["it", "don", "we", "they", "I", "you", "she", "can", "won", "shouldn"]

SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|begin_of_text|>",
            "<|eot_id|>", "<|start_header_id|>", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>",
            "[gMASK]", "<sop>", "<|user|>", "<|assistant|>", "<think>", "</think>", "<s>", "</s>",
            "[INST]", "[/INST]", "<|im_middle|>", "<|return|>", "<|channel|>"]

PROSE = ["The quick brown fox jumps over the lazy dog.", "Hello, world!",
         "Mixture-of-Experts models route each token to a few experts.",
         "  leading spaces", "trailing spaces   ", "UPPER lower MiXeD CamelCase snake_case",
         "e.g. i.e. etc. Mr. Dr. U.S.A.", "well-known state-of-the-art", "a\u200bzero\u200dwidth",
         "tab\tseparated\tvalues", "line one\nline two\r\nline three\rline four",
         "Numbers: 1, 12, 123, 1234, 12345, 123456, 3.14159, -42, 1e-9, 0x1F, 1,000,000"]


def contraction_cases():
    out = []
    for word, c in itertools.product(WORDS, CONTRACTIONS):
        for variant in {c, c.upper(), c.capitalize(), c[0] + c[1:].upper() if len(c) > 2 else c,
                        c[:-1] + c[-1].upper()}:
            out.append(f"{word}{variant} ")
            out.append(f"{word.upper()}{variant}")
    out += ["I'M SURE THEY'LL", "don'T wE'Ve", "ſ's 'ſ", "it’s curly ’s", "''s '' 's'"]
    return out


def runs():
    out = []
    for ch in [" ", "\t", "\n", "\r\n", "0", "7", "a", "!", "中", "😀", "\u3000", "\u00a0"]:
        for n in [2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 64, 100]:
            out.append(ch * n)
            out.append("x" + ch * n + "y")
    for n in range(1, 26):
        out.append("9" * n)
        out.append(" " * n + "word")
        out.append("word" + " " * n + "\n" + " " * n + "word")
    out += ["\n\n\n\n", " \n \n ", "\t \t \n", "a\n\n b", "  \n\n  x", "x\r\r\ny", "end \n"]
    return out


def around_specials(rng):
    out = []
    for sp in SPECIALS:
        out += [sp, f"a{sp}b", f" {sp} ", f"\n{sp}\n", f"{sp}{sp}", f"text {sp}text",
                f"{sp[:-1]}", f"x{sp}  y", f"中{sp}文"]
    for _ in range(60):
        out.append(rng.choice(PROSE) + rng.choice(SPECIALS) + rng.choice(PROSE))
    return out


def mixed(rng, count):
    pools = list(SCRIPTS.values()) + [CODE, PROSE]
    out = []
    for _ in range(count):
        parts = [rng.choice(rng.choice(pools)) for _ in range(rng.randint(2, 5))]
        sep = rng.choice(["", " ", "  ", "\n", "\t", ", ", " 123 ", "'s "])
        out.append(sep.join(parts))
    return out


def main():
    rng = random.Random(47)
    cases = []

    def add(category, strings):
        for s in strings:
            cases.append({"category": category, "text": s})

    for name, texts in SCRIPTS.items():
        add(name, texts)
        add(name, [t + " " + t for t in texts])
        add(name + "_nfd", [unicodedata.normalize("NFD", t) for t in texts])
        add(name + "_nfkc", [unicodedata.normalize("NFKC", t) for t in texts])
    add("code", CODE)
    add("code", [c.replace("    ", "\t") for c in CODE])
    add("code", [c * 3 for c in CODE])
    add("prose", PROSE)
    add("contractions", contraction_cases())
    add("runs", runs())
    add("specials", around_specials(rng))
    add("numbers", [str(rng.randint(0, 10 ** rng.randint(1, 20))) for _ in range(80)])
    add("numbers", ["%.*f" % (rng.randint(0, 6), rng.uniform(-1e6, 1e6)) for _ in range(40)])
    add("mixed", mixed(rng, 2000 - len(cases) + 200))
    assert len(cases) >= 2000, len(cases)
    with open(OUT, "w") as f:
        json.dump({"note": "generated by tools/gen_tokenizer_corpus.py (seed 47)",
                   "cases": cases}, f, ensure_ascii=True, separators=(",", ":"))
    cats = {}
    for c in cases:
        cats[c["category"]] = cats.get(c["category"], 0) + 1
    print("wrote", OUT, len(cases), "strings", cats)


if __name__ == "__main__":
    sys.exit(main())
