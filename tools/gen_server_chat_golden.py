#!/usr/bin/env python3
"""Token ids of OpenAI chat requests as transformers renders and tokenizes
them, for the server's chat test (tests/server/server_agent_test.cc).

The model is tests/golden/moe/glm_moe_dsa (the tiny GLM-5 golden) with the
real GLM-5.2 template (tests/golden/chat/templates/glm-5.2.jinja), as the test
serves it. Each request holds tools, assistant tool_calls (arguments as JSON
text, as OpenAI clients send them), tool results, reasoning_content fed back,
chat_template_kwargs and reasoning_effort; the Python side passes arguments as
dicts, as vLLM does and as the templates iterate them. Writes
tests/golden/chat/server_chat_prompts.json: [{request, ids}].

Usage: tools/.venv/bin/python tools/gen_server_chat_golden.py
"""

import copy
import json
import os

from transformers import AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "tests", "golden", "moe", "glm_moe_dsa")
TEMPLATE = os.path.join(ROOT, "tests", "golden", "chat", "templates", "glm-5.2.jinja")
OUT = os.path.join(ROOT, "tests", "golden", "chat", "server_chat_prompts.json")

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "description": "Current time",
                                         "parameters": {"type": "object", "properties": {}}}}

CALL = {"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 2}"}}

REQUESTS = [
    {"messages": [{"role": "system", "content": "You are terse."},
                  {"role": "user", "content": "Weather in Paris?"}],
     "tools": [WEATHER, TIME]},
    {"messages": [{"role": "user", "content": "Weather in Paris?"},
                  {"role": "assistant", "content": "", "reasoning_content": "Need the tool.",
                   "tool_calls": [CALL]},
                  {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"},
                  {"role": "user", "content": "And tomorrow?"}],
     "tools": [WEATHER]},
    {"messages": [{"role": "user", "content": "Hi <|user|> there"}],
     "chat_template_kwargs": {"enable_thinking": False}},
    {"messages": [{"role": "user", "content": "Plan a trip."}],
     "reasoning_effort": "low"},
]


def python_messages(messages):
    out = copy.deepcopy(messages)
    for m in out:
        for c in m.get("tool_calls", []):
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])
    return out


def main():
    tok = AutoTokenizer.from_pretrained(MODEL)
    template = open(TEMPLATE, encoding="utf-8").read()
    golden = []
    for req in REQUESTS:
        kwargs = dict(req.get("chat_template_kwargs", {}))
        if "reasoning_effort" in req:
            kwargs.setdefault("reasoning_effort", req["reasoning_effort"])
        ids = tok.apply_chat_template(python_messages(req["messages"]), tools=req.get("tools"),
                                      chat_template=template, add_generation_prompt=True,
                                      tokenize=True, return_dict=False, **kwargs)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        golden.append({"request": req, "ids": list(ids)})
    with open(OUT, "w", encoding="utf-8") as f:  # one request per line
        f.write("[\n" + ",\n".join(json.dumps(g, ensure_ascii=False) for g in golden) + "\n]\n")
    print(f"wrote {OUT}: {len(golden)} requests")


if __name__ == "__main__":
    main()
