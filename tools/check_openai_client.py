#!/usr/bin/env python3
"""Drives `anymoe serve` with the official `openai` Python client: forced and
parallel tool calls (whole and streamed, the client's own delta
accumulation), a tool round trip (the assistant message with tool_calls and
the tool results sent back), a named tool_choice, response_format
json_schema (validated with jsonschema), n > 1, streamed usage, and
client.embeddings.create (the client's default base64 and float; on the tiny
GLM-5 against transformers' mean-pooled hidden states,
tests/golden/moe/glm_moe_dsa/embeddings.json from tools/gen_embedding_golden.py).

Models: the tiny GLM-5 golden served with the real GLM-5.2 template (built in
a temporary folder, as tests/server/server_agent_test.cc does) and, when
present, models/SmolLM2-135M-Instruct.Q4_1.gguf. Exit status 0 when every
check passed.

Usage: tools/.venv/bin/python tools/check_openai_client.py [--binary build/src/anymoe]
(needs `openai` and `jsonschema` in tools/.venv)
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import jsonschema
import openai

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 24}, "days": {"type": "integer"}},
        "required": ["city", "days"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Current time",
    "parameters": {"type": "object", "properties": {
        "zone": {"type": "string", "enum": ["utc", "local"]}}, "required": ["zone"]}}}
TOOLS = [WEATHER, TIME]
SCHEMA = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 20}, "celsius": {"type": "number"},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3}},
    "required": ["city", "celsius", "tags"], "additionalProperties": False}

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def glm5_folder(tmp):
    src = os.path.join(ROOT, "tests", "golden", "moe", "glm_moe_dsa")
    out = os.path.join(tmp, "glm5")
    os.makedirs(out)
    for f in ("model.safetensors", "tokenizer.json", "tokenizer_config.json",
              "generation_config.json"):
        os.symlink(os.path.join(src, f), os.path.join(out, f))
    config = json.load(open(os.path.join(src, "config.json")))
    config["max_position_embeddings"] = 4096  # tool prompts are long; RoPE works anywhere
    json.dump(config, open(os.path.join(out, "config.json"), "w"))
    shutil.copy(os.path.join(ROOT, "tests", "golden", "chat", "templates", "glm-5.2.jinja"),
                os.path.join(out, "chat_template.jinja"))
    return out


def serve(binary, model, extra=()):
    p = subprocess.Popen([binary, "serve", "-m", model, "--port", "0", "--parallel", "4",
                          "-c", "4096", "-t", "2", "--no-request-log", *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in p.stdout:
        m = re.search(r"listening on (http://\S+)", line)
        if m:
            url = m.group(1)
        if line.startswith("anymoe: ready") or "ready:" in line:
            return p, url
    raise RuntimeError("anymoe serve did not start")


def accumulate(stream):
    """Tool calls, content and reasoning from a stream, as clients merge deltas."""
    calls, content, reasoning, finish = {}, "", "", None
    for chunk in stream:
        if not chunk.choices:
            continue
        c = chunk.choices[0]
        d = c.delta
        content += d.content or ""
        reasoning += getattr(d, "reasoning_content", None) or (d.model_extra or {}).get(
            "reasoning_content") or ""
        for t in d.tool_calls or []:
            entry = calls.setdefault(t.index, {"id": None, "name": "", "arguments": ""})
            if t.id:
                check(entry["id"] is None and entry["arguments"] == "" and t.function.name,
                      "stream: a call opens with its id and name before arguments")
                entry["id"] = t.id
                entry["name"] = t.function.name
            entry["arguments"] += t.function.arguments or ""
        if c.finish_reason:
            finish = c.finish_reason
    return [calls[i] for i in sorted(calls)], content, reasoning, finish


def run_checks(client, label):
    msgs = [{"role": "user", "content": "Weather in Paris for 2 days, and the time in UTC?"}]
    for seed in (1, 2, 3):
        r = client.chat.completions.create(model="m", messages=msgs, tools=TOOLS,
                                           tool_choice="required", max_tokens=120,
                                           temperature=0.9, seed=seed)
        ch = r.choices[0]
        calls = ch.message.tool_calls or []
        check(ch.finish_reason == "tool_calls" and len(calls) >= 1,
              f"{label}: required gives tool calls (seed {seed}, {len(calls)} calls)")
        ok = True
        for c in calls:
            tool = next(t for t in TOOLS if t["function"]["name"] == c.function.name)
            try:
                jsonschema.validate(json.loads(c.function.arguments), tool["function"]["parameters"])
            except Exception as e:  # noqa: BLE001 - reported as a failed check
                ok = False
                print("   ", e)
        check(ok and len({c.id for c in calls}) == len(calls),
              f"{label}: arguments validate, ids distinct (seed {seed})")
        s_calls, _, _, finish = accumulate(client.chat.completions.create(
            model="m", messages=msgs, tools=TOOLS, tool_choice="required", max_tokens=120,
            temperature=0.9, seed=seed, stream=True))
        check(finish == "tool_calls" and
              [(c["name"], c["arguments"]) for c in s_calls] ==
              [(c.function.name, c.function.arguments) for c in calls],
              f"{label}: streamed calls reassemble to the whole ones (seed {seed})")

    # The round trip: the assistant message as the client returns it, then results.
    r = client.chat.completions.create(model="m", messages=msgs, tools=TOOLS,
                                       tool_choice="required", max_tokens=120, temperature=0)
    turn = msgs + [r.choices[0].message.model_dump(exclude_none=True)]
    for c in r.choices[0].message.tool_calls:
        turn.append({"role": "tool", "tool_call_id": c.id, "content": json.dumps({"ok": True})})
    r2 = client.chat.completions.create(model="m", messages=turn, tools=TOOLS, max_tokens=16,
                                        temperature=0)
    check(r2.choices[0].finish_reason in ("stop", "length", "tool_calls"),
          f"{label}: tool results accepted in the next turn ({r2.choices[0].finish_reason})")

    r = client.chat.completions.create(
        model="m", messages=msgs, tools=TOOLS, max_tokens=80, temperature=0,
        tool_choice={"type": "function", "function": {"name": "get_time"}})
    calls = r.choices[0].message.tool_calls or []
    check(len(calls) == 1 and calls[0].function.name == "get_time" and
          json.loads(calls[0].function.arguments)["zone"] in ("utc", "local"),
          f"{label}: named tool_choice forces get_time")

    for seed in (1, 2):
        r = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Paris weather as JSON"}],
            response_format={"type": "json_schema",
                             "json_schema": {"name": "w", "schema": SCHEMA, "strict": True}},
            max_tokens=100, temperature=1.0, seed=seed)
        try:
            jsonschema.validate(json.loads(r.choices[0].message.content), SCHEMA)
            valid = True
        except Exception as e:  # noqa: BLE001
            print("   ", e)
            valid = False
        check(valid, f"{label}: json_schema reply validates (seed {seed})")

    try:
        client.chat.completions.create(
            model="m", messages=msgs, max_tokens=8,
            response_format={"type": "json_schema", "json_schema": {
                "name": "x", "schema": {"type": "string", "pattern": "a+"}}})
        check(False, f"{label}: unsupported keyword refused")
    except openai.BadRequestError as e:
        check(e.body.get("param") == "response_format.json_schema.schema" and
              "pattern" in e.body.get("message", ""),
              f"{label}: unsupported keyword refused with a 400 naming it")

    r = client.chat.completions.create(model="m", messages=msgs, n=3, max_tokens=8,
                                       temperature=1.0, seed=5)
    check([c.index for c in r.choices] == [0, 1, 2], f"{label}: n=3 gives three choices")
    usage = None
    for chunk in client.chat.completions.create(model="m", messages=msgs, max_tokens=8,
                                                stream=True,
                                                stream_options={"include_usage": True}):
        usage = chunk.usage or usage
    check(usage is not None and usage.completion_tokens >= 1, f"{label}: streamed usage")


def run_embedding_checks(client, label, golden):
    texts = ["The quick brown fox", "A lazy dog", "x"]
    # The client asks for base64 unless told and decodes it itself.
    b64 = client.embeddings.create(model="m", input=texts)
    flt = client.embeddings.create(model="m", input=texts, encoding_format="float")
    check([d.index for d in b64.data] == [0, 1, 2], f"{label}: embeddings in input order")
    check(all(a.embedding == b.embedding for a, b in zip(b64.data, flt.data)),
          f"{label}: base64 embeddings equal float ones")
    check(all(abs(sum(x * x for x in d.embedding) - 1) < 1e-5 for d in flt.data),
          f"{label}: embeddings are L2-normalised")
    check(b64.usage.prompt_tokens >= 3, f"{label}: embeddings usage")
    if golden:
        cases = json.load(open(golden))["cases"]
        r = client.embeddings.create(model="m", encoding_format="float",
                                     input=[c["ids"] for c in cases])
        worst = 0.0
        for c, d in zip(cases, r.data):
            norm = sum(x * x for x in c["mean"]) ** 0.5
            worst = max(worst, max(abs(a - b / norm) for a, b in zip(d.embedding, c["mean"])))
        check(len(r.data) == len(cases) and worst < 1e-4,
              f"{label}: embeddings match transformers (max diff {worst:.2e} < 1e-4)")
    try:
        client.embeddings.create(model="m", input="")
        check(False, f"{label}: empty embedding input refused")
    except openai.BadRequestError as e:
        check(e.body.get("code") == "empty_input", f"{label}: empty embedding input refused")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "src", "anymoe"))
    args = ap.parse_args()
    models = []
    with tempfile.TemporaryDirectory() as tmp:
        models.append(("tiny GLM-5", glm5_folder(tmp)))
        smol = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
        if os.path.exists(smol):
            models.append(("SmolLM2", smol))
        for label, model in models:
            proc, url = serve(args.binary, model)
            try:
                client = openai.OpenAI(base_url=url + "/v1", api_key="none")
                run_checks(client, label)
                golden = os.path.join(ROOT, "tests", "golden", "moe", "glm_moe_dsa",
                                      "embeddings.json") if label == "tiny GLM-5" else None
                run_embedding_checks(client, label, golden)
            finally:
                proc.terminate()
                proc.wait(timeout=30)
    print(f"{len(failures)} failed" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
