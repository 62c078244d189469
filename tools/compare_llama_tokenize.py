#!/usr/bin/env python3
"""Checks anymoe's ids against llama.cpp's on vocabulary-only GGUFs that
llama.cpp's own converter writes from the real tokenizer files (issue 47).

For each real tokenizer.json folder (tools/fetch_real_tokenizers.py), this
writes a minimal config.json of the model's architecture beside the tokenizer
files, runs llama.cpp's convert_hf_to_gguf.py --vocab-only, then tokenizes
every string of corpus_large.json with `llama-tokenize` and with
`anymoe tokenize` on that GGUF (no BOS, special tokens parsed) and counts the
strings whose ids are identical. deepseek-llm is listed but llama.cpp's
converter (with transformers 5.x) does not recognise its pre-tokenizer. llama.cpp is built beside the project, not
part of it: pass its folder (with build/bin/llama-tokenize).

Usage: /work/venv-hf/bin/python tools/compare_llama_tokenize.py \\
         --llama-cpp /work/ext/llama.cpp [--anymoe build/src/anymoe] [--every N] [NAME...]
"""

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REAL = os.path.join(ROOT, "models", "real-tokenizers")
CORPUS = os.path.join(ROOT, "tests", "golden", "tokenizer", "corpus_large.json")

# The smallest config.json the converter reads for each file's architecture
# (only the vocabulary is written; the sizes are placeholders).
SIZES = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
         "num_attention_heads": 2, "num_key_value_heads": 2, "max_position_embeddings": 4096,
         "rms_norm_eps": 1e-6, "rope_theta": 10000.0}
CONFIGS = {
    "deepseek-v3": {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
                    "vocab_size": 129280, "moe_intermediate_size": 64, "n_routed_experts": 4,
                    "n_shared_experts": 1, "num_experts_per_tok": 2, "first_k_dense_replace": 1,
                    "kv_lora_rank": 16, "q_lora_rank": 16, "qk_nope_head_dim": 16,
                    "qk_rope_head_dim": 16, "v_head_dim": 16, "n_group": 1, "topk_group": 1,
                    "routed_scaling_factor": 1.0, "norm_topk_prob": True,
                    "scoring_func": "sigmoid", "topk_method": "noaux_tc"},
    "deepseek-llm": {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                     "vocab_size": 102400},
    "llama3": {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
               "vocab_size": 128256},
}


def write_gguf(name, llama_cpp, work):
    model_dir = os.path.join(work, name)
    os.makedirs(model_dir)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        if os.path.exists(os.path.join(REAL, name, f)):
            shutil.copy(os.path.join(REAL, name, f), model_dir)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump({**SIZES, **CONFIGS[name]}, f)
    out = os.path.join(work, name + ".vocab.gguf")
    subprocess.run([sys.executable, os.path.join(llama_cpp, "convert_hf_to_gguf.py"), model_dir,
                    "--vocab-only", "--outfile", out], check=True, capture_output=True)
    return out


def ids_of(cmd, text):
    r = subprocess.run(cmd, input=text, capture_output=True)
    if r.returncode != 0:
        return "error: " + r.stderr.decode(errors="replace")[-200:]
    return json.loads(r.stdout.decode().strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-cpp", required=True)
    ap.add_argument("--anymoe", default=os.path.join(ROOT, "build", "src", "anymoe"))
    ap.add_argument("--every", type=int, default=1,
                    help="take every Nth corpus string (each costs two process starts)")
    ap.add_argument("names", nargs="*", default=list(CONFIGS))
    args = ap.parse_args()
    tokenize = os.path.join(args.llama_cpp, "build", "bin", "llama-tokenize")
    texts = [c["text"].encode("utf-8", "surrogateescape")
             for c in json.load(open(CORPUS))["cases"]][::args.every]
    failed = False
    with tempfile.TemporaryDirectory() as work:
        for name in args.names:
            gguf = write_gguf(name, args.llama_cpp, work)
            theirs_cmd = [tokenize, "-m", gguf, "--stdin", "--ids", "--no-bos", "--no-escape",
                          "--log-disable"]
            ours_cmd = [args.anymoe, "tokenize", "-m", gguf, "--stdin", "--ids", "--no-bos"]

            def compare(text):
                return ids_of(ours_cmd, text), ids_of(theirs_cmd, text)

            same, differ = 0, []
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                for text, (ours, theirs) in zip(texts, pool.map(compare, texts)):
                    if ours == theirs:
                        same += 1
                    else:
                        differ.append((text, ours, theirs))
            print(f"{name}: {same} of {len(texts)} strings identical to llama-tokenize")
            for text, ours, theirs in differ[:5]:
                print(f"  {text[:60]!r}\n    anymoe: {ours}\n    llama:  {theirs}")
            failed |= bool(differ)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
