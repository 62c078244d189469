#!/usr/bin/env python3
"""Drives `anymoe serve` with the official `anthropic` Python SDK (Messages API)
and the `openai` SDK's Responses API: create, stream (the SDK's own event
accumulator must rebuild the non-streamed message at temperature 0), thinking
blocks on a GLM template, a forced tool_use -> tool_result -> answer round
trip, count_tokens against the prompt rendered by jinja2 and encoded by the
`tokenizers` library, typed SDK exceptions for bad requests and a wrong key
(x-api-key), responses.create / responses.stream with function calls
(call_id round trip) and json_schema output validated by `jsonschema`.

Models: the tiny GLM-5 golden with the GLM-5.2 template (as
tools/check_openai_client.py builds it) and, when present,
models/SmolLM2-135M-Instruct.Q4_1.gguf. Exit status 0 when every check passed.

Usage: /work/venv-ref/bin/python tools/check_anthropic_client.py [--binary build/src/anymoe]
(needs anthropic, openai, jsonschema, jinja2, tokenizers)
"""

import argparse
import json
import os
import sys
import tempfile

import anthropic
import jinja2
import jsonschema
import openai
import tokenizers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_openai_client import ROOT, SCHEMA, check, failures, glm5_folder, serve  # noqa: E402

KEY = "test-key-123"
WEATHER = {"name": "get_weather", "description": "Current weather for a city",
           "input_schema": {"type": "object", "properties": {
               "city": {"type": "string", "maxLength": 24}, "days": {"type": "integer"}},
               "required": ["city", "days"]}}
# This SDK version has no temperature argument; the API field goes in the body.
T0 = {"temperature": 0}
QUESTION = [{"role": "user", "content": "Weather in Paris for 2 days?"}]


def comparable(message):
    """A message without what differs per request (id, tool ids)."""
    d = message.to_dict() if hasattr(message, "to_dict") else dict(message)
    d.pop("id", None)
    for block in d["content"]:
        block.pop("id", None)
        block.pop("parsed_output", None)
        block.pop("citations", None) if block.get("citations") is None else None
    d.pop("container", None)
    d.pop("stop_details", None)
    # The prefix cache serves a repeated prompt: input and cache reads differ
    # between two requests, their sum does not.
    u = d.get("usage", {})
    d["usage"] = {"prompt": u.get("input_tokens") + (u.get("cache_read_input_tokens") or 0),
                  "output": u.get("output_tokens")}
    return d


def prompt_tokens(model_dir, messages):
    """The prompt's token count from jinja2 + tokenizers, independent of anymoe."""
    source = open(os.path.join(model_dir, "chat_template.jinja")).read()
    env = jinja2.Environment(extensions=["jinja2.ext.loopcontrols"])
    text = env.from_string(source).render(messages=messages, add_generation_prompt=True,
                                          tools=None)
    tok = tokenizers.Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    return len(tok.encode(text, add_special_tokens=False).ids)


def messages_checks(client, label, model_dir):
    m = client.messages.create(model="m", max_tokens=16, extra_body=T0, messages=QUESTION)
    check(m.type == "message" and m.role == "assistant" and m.content,
          f"{label}: messages.create returns a message with content")
    check(m.stop_reason in ("end_turn", "max_tokens"), f"{label}: stop_reason {m.stop_reason}")
    check(m.usage.output_tokens >= 1, f"{label}: usage.output_tokens {m.usage.output_tokens}")

    order, indices = [], []
    with client.messages.stream(model="m", max_tokens=16, extra_body=T0,
                                messages=QUESTION) as stream:
        for event in stream:
            order.append(event.type)
            if event.type == "content_block_start":
                indices.append(event.index)
        final = stream.get_final_message()
    check(comparable(final) == comparable(m),
          f"{label}: the stream's accumulated message equals the non-streamed one")
    if comparable(final) != comparable(m):
        print(comparable(final), comparable(m))
    check(order[0] == "message_start" and order[-1] == "message_stop"
          and "message_delta" in order, f"{label}: stream events in the documented order")
    check(indices == list(range(len(indices))), f"{label}: block indices 0, 1, ... {indices}")

    # count_tokens: the real prompt's token count.
    counted = client.messages.count_tokens(model="m", messages=QUESTION).input_tokens
    used = m.usage.input_tokens + (m.usage.cache_read_input_tokens or 0)
    check(counted == used, f"{label}: count_tokens {counted} equals the request's input {used}")
    if model_dir is not None:
        ref = prompt_tokens(model_dir, QUESTION)
        check(counted == ref, f"{label}: count_tokens {counted} equals jinja2 + tokenizers {ref}")

    # Forced tool use, its result sent back, the answer.
    t = client.messages.create(model="m", max_tokens=80, extra_body=T0, messages=QUESTION,
                               tools=[WEATHER], tool_choice={"type": "tool", "name": "get_weather"})
    uses = [b for b in t.content if b.type == "tool_use"]
    ok = len(uses) == 1 and t.stop_reason == "tool_use"
    if ok:
        try:
            jsonschema.validate(uses[0].input, WEATHER["input_schema"])
        except jsonschema.ValidationError:
            ok = False
    check(ok, f"{label}: tool_choice tool gives one tool_use whose input validates")
    with client.messages.stream(model="m", max_tokens=80, extra_body=T0, messages=QUESTION,
                                tools=[WEATHER],
                                tool_choice={"type": "tool", "name": "get_weather"}) as s:
        streamed = s.get_final_message()
    check(comparable(streamed) == comparable(t), f"{label}: the streamed tool_use equals the whole")
    if uses:
        follow = QUESTION + [
            {"role": "assistant", "content": [b.to_dict() for b in t.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id,
                                          "content": "21 C, sunny"}]}]
        a = client.messages.create(model="m", max_tokens=12, extra_body=T0, messages=follow,
                                   tools=[WEATHER], tool_choice={"type": "none"})
        check(a.content and all(b.type in ("text", "thinking") for b in a.content),
              f"{label}: tool_result -> an answer without calls")

    # Errors as the SDK's typed exceptions.
    try:
        client.messages.create(model="m", max_tokens=0, messages=QUESTION)
        check(False, f"{label}: max_tokens 0 is refused")
    except anthropic.BadRequestError as e:
        check(e.status_code == 400 and e.body["error"]["type"] == "invalid_request_error",
              f"{label}: max_tokens 0 -> BadRequestError invalid_request_error")
    try:
        client.messages.create(model="m", max_tokens=8, messages=[
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x",
                                          "content": "?"}]}])
        check(False, f"{label}: an unknown tool_use_id is refused")
    except anthropic.BadRequestError as e:
        check("tool_use_id" in e.message, f"{label}: unknown tool_use_id -> BadRequestError")


def thinking_checks(client, label):
    on = client.messages.create(model="m", max_tokens=2048, extra_body=T0, messages=QUESTION,
                                thinking={"type": "enabled", "budget_tokens": 1024},
                                stop_sequences=["."])
    check(on.content and on.content[0].type == "thinking",
          f"{label}: thinking enabled gives a thinking block first")
    off = client.messages.create(model="m", max_tokens=16, extra_body=T0, messages=QUESTION,
                                 thinking={"type": "disabled"})
    check(all(b.type != "thinking" for b in off.content),
          f"{label}: thinking disabled gives no thinking block")


def responses_checks(client, label):
    r = client.responses.create(model="m", input="Hello", max_output_tokens=12, temperature=0)
    check(r.object == "response" and r.status in ("completed", "incomplete") and r.usage,
          f"{label}: responses.create ({r.status}, {r.usage.output_tokens} tokens)")
    order, final = [], None
    with client.responses.stream(model="m", input="Hello", max_output_tokens=12,
                                 temperature=0) as stream:
        for event in stream:
            order.append(event.type)
            # get_final_response() knows response.completed only; a response
            # cut at max_output_tokens ends with response.incomplete.
            if event.type in ("response.completed", "response.incomplete"):
                final = event.response
    strip = lambda resp: [{k: v for k, v in item.to_dict().items() if k != "id"}  # noqa: E731
                          for item in resp.output]
    check(strip(final) == strip(r), f"{label}: responses.stream rebuilds the same output")
    check(order[:2] == ["response.created", "response.in_progress"]
          and order[-1] in ("response.completed", "response.incomplete"),
          f"{label}: response.* events in order ({len(order)} events)")

    tool = {"type": "function", "name": "get_weather", "parameters": WEATHER["input_schema"]}
    c = client.responses.create(model="m", input="Weather in Paris?", tools=[tool],
                                tool_choice={"type": "function", "name": "get_weather"},
                                max_output_tokens=80, temperature=0)
    calls = [o for o in c.output if o.type == "function_call"]
    ok = len(calls) == 1 and calls[0].call_id
    if ok:
        try:
            jsonschema.validate(json.loads(calls[0].arguments), WEATHER["input_schema"])
        except (ValueError, jsonschema.ValidationError):
            ok = False
    check(ok, f"{label}: a forced function_call with call_id whose arguments validate")
    if calls:
        follow = client.responses.create(
            model="m", tools=[tool], max_output_tokens=12, temperature=0, tool_choice="none",
            input=[{"role": "user", "content": "Weather in Paris?"},
                   {"type": "function_call", "call_id": calls[0].call_id,
                    "name": "get_weather", "arguments": calls[0].arguments},
                   {"type": "function_call_output", "call_id": calls[0].call_id,
                    "output": "21 C"}])
        check(follow.status in ("completed", "incomplete") and follow.output,
              f"{label}: function_call_output round trip answers")

    s = client.responses.create(model="m", input="Weather in Paris as JSON",
                                max_output_tokens=80, temperature=0,
                                text={"format": {"type": "json_schema", "name": "w",
                                                 "schema": SCHEMA, "strict": True}})
    try:
        jsonschema.validate(json.loads(s.output_text), SCHEMA)
        ok = True
    except (ValueError, jsonschema.ValidationError):
        ok = False
    check(ok, f"{label}: text.format json_schema output validates")
    try:
        client.responses.create(model="m", input="x", store=True)
        check(False, f"{label}: store true is refused")
    except openai.BadRequestError as e:
        check(e.status_code == 400, f"{label}: store true -> BadRequestError (no stored responses)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "src", "anymoe"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        models = [("tiny GLM-5", glm5_folder(tmp))]
        smol = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
        if os.path.exists(smol):
            models.append(("SmolLM2", smol))
        for label, model in models:
            proc, url = serve(args.binary, model, ["--api-key", KEY])
            try:
                client = anthropic.Anthropic(base_url=url, api_key=KEY)
                is_glm = model.endswith("glm5")
                messages_checks(client, label, model if is_glm else None)
                if is_glm:
                    thinking_checks(client, label)
                try:
                    anthropic.Anthropic(base_url=url, api_key="wrong").messages.create(
                        model="m", max_tokens=4, messages=QUESTION)
                    check(False, f"{label}: a wrong x-api-key is refused")
                except anthropic.AuthenticationError as e:
                    check(e.body["error"]["type"] == "authentication_error",
                          f"{label}: wrong x-api-key -> AuthenticationError")
                responses_checks(openai.OpenAI(base_url=url + "/v1", api_key=KEY), label)
            finally:
                proc.terminate()
                proc.wait(timeout=30)
    print(f"{len(failures)} failed" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
