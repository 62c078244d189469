#!/usr/bin/env python3
"""GBNF grammars end to end: starts `anymoe serve` on a model, sends every
grammar of tests/golden/chat/gbnf/*.gbnf through llama-server's native
`POST /completion` (`grammar`) at temperature 0 and at temperature 1 with
several seeds, and checks with Lark (tools/gbnf_lark.py, an independent
Earley parser) that every output is a sentence of its grammar.

Usage (from the repo root, after building):
  /work/venv-ref/bin/python tools/check_gbnf_outputs.py -m models/SmolLM2-135M-Instruct.Q4_1.gguf
Prints one line per grammar and the pass rate; exits non-zero unless every
output parses.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gbnf_lark import Recognizer  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A prompt that invites each grammar's kind of text (any prompt would do: the
# grammar decides what is written).
PROMPTS = {
    "arithmetic.gbnf": "An arithmetic expression: ",
    "json.gbnf": "A JSON object describing a book: ",
    "list.gbnf": "Three things to pack for a trip:\n",
    "tree.gbnf": "A Lisp S-expression: ",
    "unicode.gbnf": "A greeting in another language: ",
    "repetition.gbnf": "A product identifier: ",
    "answer.gbnf": "Question: which letter comes first in the alphabet?\n",
    "csv.gbnf": "A CSV table of people:\n",
    "anychar.gbnf": "An HTML snippet: ",
    "nullable.gbnf": "Letters: ",
}


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def start_server(binary, model, threads):
    proc = subprocess.Popen([binary, "serve", "-m", model, "--port", "0", "-t", threads, "-c", "2048"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 300
    for line in proc.stdout:
        # "listening on http://127.0.0.1:PORT"
        if "127.0.0.1:" in line:
            port = int(line.split("127.0.0.1:")[1].split()[0].strip("/ ,()"))
            while time.time() < deadline:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5)
                    return proc, port
                except Exception:
                    time.sleep(0.5)
        if time.time() > deadline:
            break
    proc.kill()
    raise SystemExit("the server did not start")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "src", "anymoe"))
    ap.add_argument("--grammars", default=os.path.join(ROOT, "tests", "golden", "chat", "gbnf"))
    ap.add_argument("-n", "--n-predict", type=int, default=96)
    ap.add_argument("--seeds", type=int, default=5, help="temperature-1 runs per grammar")
    ap.add_argument("-t", "--threads", default="2")
    args = ap.parse_args()
    proc, port = start_server(args.binary, args.model, args.threads)
    total = passed = 0
    failures = []
    try:
        for path in sorted(glob.glob(os.path.join(args.grammars, "*.gbnf"))):
            name = os.path.basename(path)
            grammar = open(path, encoding="utf-8").read()
            rec = Recognizer(grammar)
            runs = [(0.0, 1)] + [(1.0, s) for s in range(1, args.seeds + 1)]
            ok = 0
            example = None
            for temp, seed in runs:
                body = post(port, "/completion", {"prompt": PROMPTS.get(name, "Text: "),
                                                  "grammar": grammar, "n_predict": args.n_predict,
                                                  "temperature": temp, "seed": seed})
                text = body["content"]
                if example is None:
                    example = text
                label = rec.label(text)
                total += 1
                if label == "accept":
                    ok += 1
                else:
                    failures.append((name, temp, seed, label, text))
            passed += ok
            print(f"{name:16s} {ok}/{len(runs)} parse; temperature 0: {json.dumps(example)[:70]}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    for f in failures:
        print("FAIL", f)
    print(f"{passed}/{total} outputs are sentences of their grammar (Lark Earley): "
          f"{100.0 * passed / max(total, 1):.1f} %")
    sys.exit(0 if passed == total and total > 0 else 1)


if __name__ == "__main__":
    main()
