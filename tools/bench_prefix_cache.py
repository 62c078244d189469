#!/usr/bin/env python3
"""TTFT of a 10-turn chat with and without prefix caching (issue 23: turn 10
with a ~1,000-token history at least 5x faster with the cache; greedy
replies identical).

Starts `anymoe serve` twice on the model (with and with --no-prefix-cache),
sends the same conversation (a long system prompt, then 10 user turns, each
holding the previous replies), streamed, temperature 0, and prints per turn
the prompt tokens, the cached tokens and the time to the first streamed
chunk. Take figures on a quiet machine.

Usage: tools/.venv/bin/python tools/bench_prefix_cache.py [-m MODEL] [--binary B]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SYSTEM = ("You are a careful assistant for a team of engineers. " * 90).strip()


def serve(binary, model, extra):
    p = subprocess.Popen([binary, "serve", "-m", model, "--port", "0", "--no-request-log",
                          "-c", "8192"] + extra,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = None
    for line in p.stdout:
        m = re.search(r"listening on (http://\S+)", line)
        if m:
            url = m.group(1)
        if "ready:" in line:
            return p, url
    raise RuntimeError("anymoe serve did not start")


def turn(url, messages):
    body = json.dumps({"messages": messages, "max_tokens": 24, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", body,
                                 {"Content-Type": "application/json"})
    start = time.perf_counter()
    ttft, text, usage = None, "", None
    with urllib.request.urlopen(req) as res:
        for raw in res:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            ev = json.loads(line[5:])
            if ev.get("usage"):
                usage = ev["usage"]
            for c in ev.get("choices", []):
                piece = c["delta"].get("content", "") + c["delta"].get("reasoning_content", "")
                if piece and ttft is None:
                    ttft = time.perf_counter() - start
                text += piece
    return ttft, text, usage


def conversation(url):
    messages = [{"role": "system", "content": SYSTEM}]
    rows = []
    for i in range(10):
        messages.append({"role": "user", "content": f"Question {i}: summarise step {i}."})
        ttft, text, usage = turn(url, messages)
        messages.append({"role": "assistant", "content": text})
        details = usage.get("prompt_tokens_details") or {}
        rows.append((usage["prompt_tokens"], details.get("cached_tokens", 0), ttft, text))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", default=os.path.join(ROOT, "models",
                                                          "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "src", "anymoe"))
    args = ap.parse_args()
    results = {}
    for label, extra in (("cache", []), ("no cache", ["--no-prefix-cache"])):
        proc, url = serve(args.binary, args.model, extra)
        try:
            results[label] = conversation(url)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print("turn  prompt  cached  ttft cache (ms)  ttft no cache (ms)  speedup  same text")
    for i, (a, b) in enumerate(zip(results["cache"], results["no cache"])):
        print(f"{i + 1:4d}  {a[0]:6d}  {a[1]:6d}  {a[2] * 1e3:15.1f}  {b[2] * 1e3:18.1f}"
              f"  {b[2] / a[2]:7.2f}  {a[3] == b[3]}")
    same = all(a[3] == b[3] for a, b in zip(results["cache"], results["no cache"]))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
