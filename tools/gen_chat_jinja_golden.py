#!/usr/bin/env python3
"""Renders conversations with real chat templates exactly as transformers'
apply_chat_template does, for the C++ Jinja engine's golden test.

Reads tests/golden/chat/templates/*.jinja (sources in MANIFEST.md there) and
writes tests/golden/chat/jinja_render.golden.json, which
tests/chat/jinja_golden_test.cc renders byte for byte. Rendering goes through
transformers' own code: _normalize_chat_messages (drops None-valued keys) and
render_jinja_template (ImmutableSandboxedEnvironment, trim/lstrip blocks,
loopcontrols, tojson = json.dumps, raise_exception, strftime_now, reasoning
fields aliased). A template that raises records the exception's type and text.

Usage: tools/.venv/bin/python tools/gen_chat_jinja_golden.py
"""

import copy
import json
import os
import sys

import jinja2
import transformers
from transformers.utils.chat_template_utils import _normalize_chat_messages, render_jinja_template

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "golden", "chat")

DS_BOS, DS_EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
TEMPLATES = {  # file -> (bos_token, eos_token) transformers passes from the tokenizer
    "glm-4.5.jinja": (None, "<|endoftext|>"),
    "glm-4.6.jinja": (None, "<|endoftext|>"),
    "glm-4.7-flash.jinja": (None, "<|endoftext|>"),
    "glm-5.2.jinja": (None, "<|endoftext|>"),
    "deepseek-v3.1.jinja": (DS_BOS, DS_EOS),
    "deepseek-r1-distill-qwen.jinja": (DS_BOS, DS_EOS),
    "qwen3.jinja": (None, "<|im_end|>"),
    "qwen3-coder.jinja": (None, "<|im_end|>"),
    "llama-3.1.jinja": ("<|begin_of_text|>", "<|eot_id|>"),
    "hermes-3.jinja": ("<|begin_of_text|>", "<|im_end|>"),
    "smollm2.jinja": ("<|im_start|>", "<|im_end|>"),
}

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. Zürich"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search_docs", "description": "Full-text search; returns «snippets» 文档",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1},
        "filters": {"type": "object", "properties": {"lang": {"type": "array", "items": {"type": "string"}}}},
        "exact": {"type": "boolean"}, "score": {"type": "number"}},
        "required": ["query"]}}}
NOW = {"type": "function", "function": {"name": "get_time", "description": "Current time",
                                         "parameters": {"type": "object", "properties": {}}}}
TOOLS = [WEATHER, SEARCH, NOW]


def u(c):
    return {"role": "user", "content": c}


def a(c, **kw):
    return {"role": "assistant", "content": c, **kw}


def s(c):
    return {"role": "system", "content": c}


def call(name, args, cid=None, as_string=False):
    tc = {"type": "function", "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False) if as_string else args}}
    if cid:
        tc["id"] = cid
    return tc


def tool(c, cid=None, name=None):
    m = {"role": "tool", "content": c}
    if cid:
        m["tool_call_id"] = cid
    if name:
        m["name"] = name
    return m


def conversations():
    """(name, messages, tools, kwargs, add_generation_prompt) tuples."""
    sys_msg = s("You are a terse assistant.")
    weather_call = a(None, tool_calls=[call("get_weather", {"city": "Paris", "unit": "celsius"}, "call_1")])
    convs = [
        ("single_user", [u("Hello!")], None, {}),
        ("system_user", [sys_msg, u("What is 2+2?")], None, {}),
        ("three_turns", [u("Hi"), a("Hello! How can I help?"), u("Tell me a joke.")], None, {}),
        ("five_with_system", [sys_msg, u("First question"), a("First answer"), u("Second question"),
                              a("Second answer")], None, {}),
        ("whitespace", [u("  padded content \n"), a("\n  spaced reply  "), u("\tok\t")], None, {}),
        ("unicode", [u("你好，世界 🚀"), a("Bonjour — ça va? 日本語もOK。"), u("Ελληνικά ✓")], None, {}),
        ("think_in_history", [u("Solve it"), a("<think>\nlet me think\n</think>\n\nThe answer is 4."),
                              u("And 3+3?")], None, {}),
        ("think_last", [u("Solve it"), a("<think>reasoning here</think>The answer is 4.")], None, {}),
        ("reasoning_field_history", [u("q1"), a("a1", reasoning_content="because r1"), u("q2")], None, {}),
        ("reasoning_field_last", [u("q1"), a("a1", reasoning_content="because r1")], None, {}),
        ("reasoning_thinking_alias", [u("q1"), a("a1", thinking="via thinking"), u("q2")], None, {}),
        ("tools_user", [u("Weather in Paris?")], TOOLS, {}),
        ("tools_system_user", [sys_msg, u("Weather in Paris?")], TOOLS, {}),
        ("tool_round_trip", [u("Weather in Paris?"), weather_call,
                             tool('{"temp": 21, "sky": "sunny"}', "call_1", "get_weather"),
                             a("It is 21°C and sunny in Paris.")], TOOLS, {}),
        ("tool_result_pending", [u("Weather in Paris?"), weather_call,
                                 tool("21C sunny", "call_1", "get_weather")], TOOLS, {}),
        ("parallel_calls", [u("Weather in Paris and Oslo?"),
                            a(None, tool_calls=[call("get_weather", {"city": "Paris"}, "c1"),
                                                call("get_weather", {"city": "Oslo"}, "c2")]),
                            tool("Paris: 21C", "c1"), tool("Oslo: 3C", "c2")], TOOLS, {}),
        ("typed_arguments", [u("Search"),
                             a("", tool_calls=[call("search_docs", {"query": "kv cache", "limit": 5,
                                                                    "filters": {"lang": ["en", "de"]},
                                                                    "exact": True, "score": 0.5,
                                                                    "note": None})])], TOOLS, {}),
        ("string_arguments", [u("Weather?"),
                              a(None, tool_calls=[call("get_weather", {"city": "Köln"}, "c9", as_string=True)]),
                              tool("cloudy", "c9")], TOOLS, {}),
        ("zero_arguments", [u("What time is it?"), a(None, tool_calls=[call("get_time", {}, "t1")]),
                            tool("12:00", "t1")], TOOLS, {}),
        ("content_with_call", [u("Weather?"),
                               a("Let me check.", tool_calls=[call("get_weather", {"city": "Rome"}, "r1")]),
                               tool("hot", "r1"), a("It is hot.")], TOOLS, {}),
        ("tool_unicode_result", [u("Search 文档"), a(None, tool_calls=[call("search_docs", {"query": "文档"})]),
                                 tool("结果：三条 «ok»")], TOOLS, {}),
        ("content_parts", [{"role": "user", "content": [{"type": "text", "text": "part one "},
                                                         {"type": "text", "text": "part two"}]}], None, {}),
        ("empty_user", [u("")], None, {}),
        ("system_only", [s("Only a system prompt.")], None, {}),
        ("thinking_off", [u("Quick answer please")], None, {"enable_thinking": False}),
        ("thinking_on", [u("Think hard")], None, {"enable_thinking": True}),
        ("thinking_off_history", [u("q1"), a("<think>r</think>a1"), u("q2")], None, {"enable_thinking": False}),
        ("effort_high", [u("Prove it")], None, {"reasoning_effort": "high"}),
        ("effort_low", [u("Prove it")], None, {"reasoning_effort": "low"}),
        ("keep_history_thinking", [u("q1"), a("a1", reasoning_content="r1"), u("q2"),
                                   a("a2", reasoning_content="r2"), u("q3")], None, {"clear_thinking": False}),
        ("tools_thinking_off", [u("Weather in Paris?")], TOOLS, {"enable_thinking": False}),
        ("two_systems", [s("First system."), s("Second system."), u("Hi")], None, {}),
        ("long_chat", [m for i in range(6) for m in (u(f"question {i}"), a(f"answer {i}"))] + [u("last")], None, {}),
        ("special_chars", [u('quotes " and \' and \\ backslash\nnew line\ttab'),
                           a("<|im_end|> not a real end </s>"), u("[gMASK] <|user|> {{ not jinja }}")], None, {}),
        ("think_in_user", [u("what does </think> mean?")], None, {}),
        ("whitespace_assistant", [u("hi"), a("   "), u("again")], None, {}),
        ("agentic_chain", [sys_msg, u("Find the weather then search."),
                           a("", reasoning_content="Need weather first.",
                             tool_calls=[call("get_weather", {"city": "Oslo"}, "a1")]),
                           tool("3C", "a1"),
                           a("", reasoning_content="Now search.",
                             tool_calls=[call("search_docs", {"query": "Oslo weather", "limit": 2}, "a2")]),
                           tool("two results", "a2")], TOOLS, {}),
        ("tool_calls_no_tools", [u("Weather?"), weather_call, tool("fine", "call_1")], None, {}),
    ]
    cases = []
    for name, msgs, tools, kwargs in convs:
        cases.append((name, msgs, tools, kwargs, True))
    for name in ("three_turns", "think_last", "tool_round_trip", "reasoning_field_last", "special_chars",
                 "five_with_system", "parallel_calls", "content_with_call"):
        msgs, tools, kwargs = next((m, t, k) for n, m, t, k in convs if n == name)
        cases.append((name + "/no_generation_prompt", msgs, tools, kwargs, False))
    return cases


def render(source, messages, tools, kwargs, gen, bos, eos):
    special = {}
    if bos is not None:
        special["bos_token"] = bos
    if eos is not None:
        special["eos_token"] = eos
    chat = _normalize_chat_messages(copy.deepcopy(messages))
    rendered, _ = render_jinja_template(conversations=[chat], tools=copy.deepcopy(tools), chat_template=source,
                                        add_generation_prompt=gen, **{**special, **kwargs})
    return rendered[0]


def main():
    out = {"note": "generated by tools/gen_chat_jinja_golden.py", "jinja2": jinja2.__version__,
           "transformers": transformers.__version__, "templates": {}, "cases": []}
    counts = {}
    for name, (bos, eos) in TEMPLATES.items():
        with open(os.path.join(GOLDEN, "templates", name), encoding="utf-8") as f:
            source = f.read()
        out["templates"][name] = {"bos_token": bos, "eos_token": eos}
        ok = raised = 0
        for case_name, messages, tools, kwargs, gen in conversations():
            case = {"template": name, "name": case_name, "messages": messages, "tools": tools,
                    "kwargs": kwargs, "add_generation_prompt": gen}
            try:
                case["expected"] = render(source, messages, tools, kwargs, gen, bos, eos)
                ok += 1
            except Exception as e:  # noqa: BLE001 - the golden records what the template raised
                case["error"] = {"type": type(e).__name__, "message": str(e)}
                raised += 1
            out["cases"].append(case)
        counts[name] = (ok, raised)
    with open(os.path.join(GOLDEN, "jinja_render.golden.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    for name, (ok, raised) in counts.items():
        print(f"{name}: {ok} rendered, {raised} raised")


if __name__ == "__main__":
    sys.exit(main())
