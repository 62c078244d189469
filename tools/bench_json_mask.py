#!/usr/bin/env python3
"""Decode speed with and without a JSON constraint, side by side (issue 23:
the mask may cost at most 10 % of decode speed at batch 1 and batch 8).

Starts `anymoe serve` once and sends, in interleaved rounds, B concurrent
streamed chat requests (B = 1 and 8) asking for a long JSON document: once
plain, once with response_format json_object (constrained decoding). A
request's decode rate is (streamed tokens - 1) / (last token - first token),
from the usage the stream reports and client-side timestamps; a round's
figure is the median over its requests, and each round gives the ratio
constrained / plain. Prints medians and ranges over the rounds. Take figures
on a quiet machine.

Usage: python3 tools/bench_json_mask.py [-m MODEL] [--binary B] [--rounds R]
"""

import argparse
import json
import os
import statistics
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_prefix_cache import serve  # noqa: E402  (starts anymoe serve, waits until ready)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMPT = ("Write a JSON object describing twenty European countries: for each its "
          "name, capital, population, area, currency, languages and three famous "
          "landmarks. Output only the JSON.")


def one_request(url, constrained, max_tokens, out):
    body = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": max_tokens,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    if constrained:
        body["response_format"] = {"type": "json_object"}
    req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    first = last = None
    tokens = 0
    with urllib.request.urlopen(req, timeout=600) as res:
        for raw in res:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            event = json.loads(line[5:])
            if event.get("usage"):
                tokens = event["usage"]["completion_tokens"]
            if event.get("choices") and event["choices"][0]["delta"].get("content"):
                now = time.perf_counter()
                first = first or now
                last = now
    if tokens > 1 and last > first:
        out.append((tokens - 1) / (last - first))


def round_rate(url, constrained, batch, max_tokens):
    rates = []
    threads = [threading.Thread(target=one_request, args=(url, constrained, max_tokens, rates))
               for _ in range(batch)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statistics.median(rates)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", default=os.path.join(ROOT, "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/src/anymoe"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("-t", "--threads", type=int, default=2)
    a = ap.parse_args()
    proc, url = serve(a.binary, a.model, ["-t", str(a.threads), "--parallel", "8"])
    try:
        round_rate(url, False, 1, 16)  # warm-up
        for batch in (1, 8):
            plain, constrained, ratios = [], [], []
            for _ in range(a.rounds):
                p = round_rate(url, False, batch, a.max_tokens)
                c = round_rate(url, True, batch, a.max_tokens)
                plain.append(p)
                constrained.append(c)
                ratios.append(c / p)
            fmt = lambda xs: f"{statistics.median(xs):.1f} ({min(xs):.1f}-{max(xs):.1f})"
            print(f"batch {batch}: decode t/s per request plain {fmt(plain)}, "
                  f"json_object {fmt(constrained)}, constrained/plain "
                  f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
