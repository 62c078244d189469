#!/usr/bin/env python3
"""Soak and fault test of `anymoe serve` (reliability.md D1, D3, D6, C1, C6, C7).

Starts the server on loopback, then for a bounded time runs many concurrent
clients that mix
  - valid requests (completions and chat, streamed and not),
  - valid streamed requests whose client disconnects at a random point
    (before the response, after some chunks, with a TCP reset or a plain close),
  - invalid requests (bad JSON, bad fields, token ids outside the vocabulary,
    deep nesting, oversized bodies, unknown routes, missing Content-Length).
Afterwards it checks that
  - no valid request failed (status 200, well-formed SSE/JSON, a finish_reason),
  - every invalid request got a 4xx with an OpenAI-shaped JSON error,
  - once idle, /metrics shows 0 running, 0 waiting and 0 KV blocks in use,
  - the server's RSS grew less than --max-rss-growth after warm-up,
  - a greedy request gives the same text as before the load,
  - SIGTERM makes the server exit 0.
Exit status 0 when all checks pass; a summary (and --json) has the figures.
Only the Python standard library is used.
"""
import argparse
import http.client
import json
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

GREEDY_PROMPT = "The capital of France is"


def log(msg):
    print("soak: " + msg, flush=True)


class Server:
    def __init__(self, args):
        cmd = [args.anymoe, "serve", "-m", args.model, "--port", "0", "-t", str(args.threads),
               "--parallel", str(args.parallel), "--queue", str(args.queue)]
        cmd += args.serve_arg
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.err_lines = []
        self.port = None
        ready = threading.Event()

        def read_stderr():
            for raw in self.proc.stderr:
                line = raw.decode("utf-8", "replace").rstrip()
                self.err_lines.append(line)
                m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
                if m:
                    self.port = int(m.group(1))
                if "anymoe: ready" in line:
                    ready.set()
            ready.set()

        threading.Thread(target=read_stderr, daemon=True).start()
        if not ready.wait(120) or self.port is None or self.proc.poll() is not None:
            raise SystemExit("soak: the server did not start:\n" + "\n".join(self.err_lines[-20:]))

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def alive(self):
        return self.proc.poll() is None


def request(port, method, path, body=None, headers=None, timeout=120):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read(), dict(resp.getheaders())
    finally:
        conn.close()


def metrics(port):
    status, body, _ = request(port, "GET", "/metrics")
    values = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#") and "{" not in line:
            name, value = line.split()
            values[name] = float(value)
    return values


def greedy_text(port):
    body = json.dumps({"prompt": GREEDY_PROMPT, "max_tokens": 12, "temperature": 0})
    status, data, _ = request(port, "POST", "/v1/completions", body,
                              {"Content-Type": "application/json"})
    if status != 200:
        raise RuntimeError("greedy request: HTTP %d %r" % (status, data[:200]))
    return json.loads(data)["choices"][0]["text"]


# ---- request kinds -------------------------------------------------------------

WORDS = ("the of and to in is you that it he was for on are as with his they at be this have "
         "from or one had by word but not what all were we when your can said there use an each "
         "which she do how their if will up other about out many then them these so some").split()


MAX_PROMPT_WORDS = 40  # lowered for small contexts in main()


def random_prompt(rng):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, MAX_PROMPT_WORDS)))


def valid_body(rng, stream):
    chat = rng.random() < 0.5
    body = {"max_tokens": rng.randint(1, 24), "stream": stream}
    if rng.random() < 0.5:
        body["temperature"] = 0
    else:
        body.update(temperature=rng.uniform(0.1, 1.5), top_p=rng.uniform(0.5, 1), seed=rng.randint(0, 1 << 30))
    if stream and rng.random() < 0.3:
        body["stream_options"] = {"include_usage": True}
    if chat:
        body["messages"] = [{"role": "user", "content": random_prompt(rng)}]
        return "/v1/chat/completions", body
    body["prompt"] = random_prompt(rng)
    return "/v1/completions", body


def check_stream(data):
    """Problems with an SSE body, or None."""
    text = data.decode("utf-8")  # must be valid UTF-8
    events = [e for e in text.split("\n\n") if e.strip()]
    if not events or events[-1].strip() != "data: [DONE]":
        return "stream does not end with data: [DONE]"
    finish = None
    for e in events[:-1]:
        if e.startswith(":"):
            continue  # ping
        if not e.startswith("data: "):
            return "bad SSE event %r" % e[:80]
        chunk = json.loads(e[6:])
        if "error" in chunk:
            return "error event %r" % e[:200]
        for c in chunk.get("choices", []):
            finish = c.get("finish_reason") or finish
    return None if finish in ("stop", "length") else "no finish_reason"


def run_valid(port, rng):
    stream = rng.random() < 0.7
    path, body = valid_body(rng, stream)
    start = time.monotonic()
    try:
        status, data, _ = request(port, "POST", path, json.dumps(body), {"Content-Type": "application/json"})
    except Exception as e:
        return "%s (stream %s) after %.2f s: %s: %s" % (path, stream, time.monotonic() - start,
                                                        type(e).__name__, e)
    if status != 200:
        return "HTTP %d %r" % (status, data[:200])
    if stream:
        return check_stream(data)
    obj = json.loads(data.decode("utf-8"))
    if obj["choices"][0]["finish_reason"] not in ("stop", "length"):
        return "finish_reason %r" % obj["choices"][0]["finish_reason"]
    return None


def run_disconnect(port, rng):
    """A streamed request whose client goes away at a random point."""
    path, body = valid_body(rng, True)
    body["max_tokens"] = rng.randint(8, 64)
    payload = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    try:
        sock.sendall(("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      "Content-Length: %d\r\n\r\n" % (path, len(payload))).encode() + payload)
        to_read = rng.choice([0, 1, 200, 600, 2000])
        got = 0
        while got < to_read:
            chunk = sock.recv(min(4096, to_read - got))
            if not chunk:
                break
            got += len(chunk)
        if rng.random() < 0.5:  # reset instead of a clean close
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    finally:
        sock.close()
    return None


def invalid_cases(rng):
    """(method, path, body bytes or None, headers): each must give a 4xx JSON error."""
    json_h = {"Content-Type": "application/json"}
    deep = b'{"messages": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    big = json.dumps({"prompt": "x" * (1 << 20 + 1)}).encode()
    return rng.choice([
        ("POST", "/v1/completions", b'{"prompt": "unterminated', json_h),
        ("POST", "/v1/completions", b"", json_h),
        ("POST", "/v1/chat/completions", json.dumps({"messages": "hi"}).encode(), json_h),
        ("POST", "/v1/completions", json.dumps({"prompt": "x", "max_tokens": -5}).encode(), json_h),
        ("POST", "/v1/completions", json.dumps({"prompt": "x", "temperature": "hot"}).encode(), json_h),
        ("POST", "/v1/completions", json.dumps({"prompt": [1, 2, -1]}).encode(), json_h),
        ("POST", "/v1/completions", json.dumps({"prompt": [1 << 31]}).encode(), json_h),
        ("POST", "/v1/completions", json.dumps({"prompt": "x", "n": 17}).encode(), json_h),
        ("POST", "/v1/chat/completions", json.dumps({
            "messages": [{"role": "user", "content": "x"}], "tool_choice": "required"}).encode(),
         json_h),
        ("POST", "/v1/chat/completions", json.dumps({
            "messages": [{"role": "user", "content": "x"}],
            "response_format": {"type": "json_schema", "json_schema": {
                # uniqueItems over an unbounded array is refused (docs/chat.md)
                "schema": {"type": "array", "items": {"type": "integer"},
                           "uniqueItems": True}}}}).encode(), json_h),
        ("POST", "/v1/chat/completions", deep, json_h),
        ("POST", "/v1/completions", big, json_h),
        ("POST", "/v1/completions", b'{"prompt": "a", "prompt": "b"}', json_h),
        ("POST", "/v1/completions", b'{"prompt": "\\ud800"}', json_h),
        ("GET", "/v1/nothing-here", None, {}),
        ("POST", "/v1/models", b"{}", json_h),
    ])


def run_invalid(port, rng):
    method, path, body, headers = invalid_cases(rng)
    status, data, _ = request(port, method, path, body, headers)
    if not 400 <= status < 500:
        return "%s %s: HTTP %d (want 4xx)" % (method, path, status)
    try:
        err = json.loads(data.decode("utf-8"))["error"]
        if not isinstance(err.get("message"), str) or not isinstance(err.get("type"), str):
            return "%s %s: error body without message/type" % (method, path)
    except (ValueError, KeyError, TypeError):
        return "%s %s: HTTP %d body is not an OpenAI error: %r" % (method, path, status, data[:120])
    return None


# ---- driver ----------------------------------------------------------------------

class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {"valid": 0, "disconnect": 0, "invalid": 0}
        self.failures = {"valid": [], "disconnect": [], "invalid": []}

    def add(self, kind, problem):
        with self.lock:
            self.counts[kind] += 1
            if problem:
                self.failures[kind].append(problem)

    def total(self):
        with self.lock:
            return sum(self.counts.values())


def client(port, seed, deadline, stats, args):
    rng = random.Random(seed)
    while time.monotonic() < deadline and (args.max_requests == 0 or stats.total() < args.max_requests):
        r = rng.random()
        kind = "disconnect" if r < args.disconnect_share else (
            "invalid" if r < args.disconnect_share + args.invalid_share else "valid")
        try:
            problem = {"valid": run_valid, "disconnect": run_disconnect, "invalid": run_invalid}[kind](port, rng)
        except Exception as e:  # a dropped connection or a malformed body
            problem = "%s: %s" % (type(e).__name__, e)
        stats.add(kind, problem)


def wait_idle(port, timeout):
    deadline = time.monotonic() + timeout
    m = {}
    while time.monotonic() < deadline:
        m = metrics(port)
        if (m.get("anymoe_requests_running", 1) == 0 and m.get("anymoe_requests_waiting", 1) == 0
                and m.get("anymoe_kv_cache_blocks_used", 1) == 0):
            return m, True
        time.sleep(0.1)
    return m, False


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--anymoe", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--max-requests", type=int, default=0, help="stop after this many (0: time only)")
    p.add_argument("--min-requests", type=int, default=0, help="fail if fewer were sent")
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--parallel", type=int, default=8)
    p.add_argument("--queue", type=int, default=64)
    p.add_argument("--disconnect-share", type=float, default=0.15)
    p.add_argument("--invalid-share", type=float, default=0.15)
    p.add_argument("--warmup-share", type=float, default=0.33,
                   help="part of the time before the RSS baseline (thread arenas and caches fill up first)")
    p.add_argument("--max-rss-growth", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--serve-arg", action="append", default=[], help="extra flag for anymoe serve")
    args = p.parse_args()

    server = Server(args)
    port = server.port
    status, data, _ = request(port, "GET", "/v1/models")
    context = json.loads(data)["data"][0]["context_length"]
    # Valid requests must fit the context (a word is a few tokens in the tiny
    # test vocabularies, plus the chat template and up to 24 generated tokens).
    global MAX_PROMPT_WORDS
    MAX_PROMPT_WORDS = max(1, min(40, context // 12))
    log("server pid %d on port %d, context %d" % (server.proc.pid, port, context))
    before = greedy_text(port)
    rss_start = server.rss_kib()

    stats = Stats()
    start = time.monotonic()
    deadline = start + args.seconds
    threads = [threading.Thread(target=client, args=(port, args.seed * 1000 + i, deadline, stats, args))
               for i in range(args.clients)]
    for t in threads:
        t.start()
    time.sleep(args.seconds * args.warmup_share)
    rss_warm = server.rss_kib()
    rss_peak = rss_warm
    rss_samples = []  # (seconds, KiB), to tell a plateau from a leak
    while any(t.is_alive() for t in threads):
        time.sleep(0.5)
        if server.alive():
            rss_peak = max(rss_peak, server.rss_kib())
            if not rss_samples or time.monotonic() - start - rss_samples[-1][0] >= 10:
                rss_samples.append((round(time.monotonic() - start), server.rss_kib()))
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start

    checks = []

    def check(ok, what):
        checks.append((bool(ok), what))
        log(("ok:   " if ok else "FAIL: ") + what)

    check(server.alive(), "the server is alive after the load")
    m, idle = wait_idle(port, 30)
    rss_end = server.rss_kib()
    after = greedy_text(port)
    growth = (rss_end - rss_warm) / rss_warm if rss_warm else 0.0
    c, f = stats.counts, stats.failures
    total = sum(c.values())
    figures = {
        "seconds": round(elapsed, 1), "clients": args.clients, "requests": total,
        "valid": c["valid"], "disconnects": c["disconnect"], "invalid": c["invalid"],
        "valid_failures": len(f["valid"]), "invalid_not_4xx_json": len(f["invalid"]),
        "disconnect_errors": len(f["disconnect"]),
        "kv_blocks_used_after": m.get("anymoe_kv_cache_blocks_used"),
        "kv_blocks_total": m.get("anymoe_kv_cache_blocks_total"),
        "running_after": m.get("anymoe_requests_running"), "waiting_after": m.get("anymoe_requests_waiting"),
        "rss_start_kib": rss_start, "rss_after_warmup_kib": rss_warm, "rss_peak_kib": rss_peak,
        "rss_end_kib": rss_end, "rss_growth_after_warmup": round(growth, 4),
        "greedy_before": before, "greedy_after": after, "rss_samples": rss_samples,
    }
    log("%d requests in %.0f s from %d clients: %d valid, %d disconnects (%.0f%%), %d invalid (%.0f%%)" % (
        total, elapsed, args.clients, c["valid"], c["disconnect"], 100.0 * c["disconnect"] / max(total, 1),
        c["invalid"], 100.0 * c["invalid"] / max(total, 1)))
    log("RSS %d KiB at start, %d after warm-up, %d peak, %d at the end: growth %.2f%% after warm-up" % (
        rss_start, rss_warm, rss_peak, rss_end, 100 * growth))
    for kind in f:
        for problem in f[kind][:5]:
            log("%s failure: %s" % (kind, problem))
    statuses = {}
    for line in server.err_lines:
        found = re.search(r'" (\d{3})$', line)
        if found:
            statuses[found.group(1)] = statuses.get(found.group(1), 0) + 1
    log("server responses by status: %s" % json.dumps(dict(sorted(statuses.items()))))
    figures["server_statuses"] = statuses
    for line in server.err_lines:
        if not re.search(r'" \d{3}$', line) and "listening" not in line and "ready" not in line:
            log("server said: " + line)
    check(len(f["valid"]) == 0, "0 failures of %d valid requests" % c["valid"])
    check(len(f["invalid"]) == 0, "all %d invalid requests got a 4xx JSON error" % c["invalid"])
    check(len(f["disconnect"]) == 0, "%d disconnects without client-side errors" % c["disconnect"])
    check(idle, "idle afterwards: 0 running, 0 waiting, %s of %s KV blocks in use" % (
        m.get("anymoe_kv_cache_blocks_used"), m.get("anymoe_kv_cache_blocks_total")))
    check(growth < args.max_rss_growth, "RSS growth after warm-up %.2f%% < %.0f%%" % (
        100 * growth, 100 * args.max_rss_growth))
    check(after == before, "greedy output unchanged: %r" % after)
    check(total >= args.min_requests, "%d requests >= %d" % (total, args.min_requests))

    server.proc.send_signal(signal.SIGTERM)
    try:
        code = server.proc.wait(30)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        code = None
    check(code == 0, "SIGTERM: exit status %s" % code)
    figures["exit_status"] = code
    if args.json:
        with open(args.json, "w") as out:
            json.dump(figures, out, indent=1)
    failed = [w for ok, w in checks if not ok]
    log("PASS" if not failed else "FAILED: " + "; ".join(failed))
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
