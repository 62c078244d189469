#!/usr/bin/env python3
"""Golden model outputs with tool calls and reasoning for the C++ parsers.

Two kinds of case, written to tests/golden/chat/tool_calls.golden.json:
- generated: a conversation ending in an assistant turn (tool calls, optional
  reasoning) is rendered with each real template by transformers; the text
  after the generation prompt is what the model is trained to emit, and the
  expected calls are the conversation's own (arguments as json.dumps);
- hand-written: edge cases per dialect (content around calls, zero-argument
  calls, typed GLM values, markup-like text, unterminated calls).
tests/chat/tool_call_golden_test.cc parses each whole and in every chunking.

Usage: tools/.venv/bin/python tools/gen_tool_call_golden.py
"""

import copy
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_chat_jinja_golden import GOLDEN, TEMPLATES, TOOLS, call, render  # noqa: E402

DIALECTS = {  # template -> (dialect, arguments as JSON strings in the messages)
    "glm-4.5.jinja": ("glm45", False),
    "glm-4.6.jinja": ("glm45", False),
    "glm-4.7-flash.jinja": ("glm47", False),
    "glm-5.2.jinja": ("glm47", False),
    "qwen3.jinja": ("hermes", False),
    "hermes-3.jinja": ("hermes", False),
    "llama-3.1.jinja": ("llama3_json", False),
    "deepseek-v3.1.jinja": ("deepseek_v3", False),
}
# deepseek-r1-distill-qwen.jinja renders calls only for content None, a key
# transformers drops, so its V3 markers are covered by hand-written cases.

TURNS = [  # (name, assistant content, reasoning, calls [(name, args)])
    ("one_call", None, None, [("get_weather", {"city": "Paris", "unit": "celsius"})]),
    ("content_and_call", "Let me check.", None, [("get_weather", {"city": "Zürich"})]),
    ("typed_args", None, None, [("search_docs", {"query": "kv cache", "limit": 5, "exact": True, "score": 0.25,
                                                 "filters": {"lang": ["en", "日本"]}})]),
    ("string_that_looks_like_json", None, None, [("search_docs", {"query": "42"})]),
    ("parallel", None, None, [("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Rome"})]),
    ("zero_args", None, None, [("get_time", {})]),
    ("reasoning_then_call", None, "User wants weather; call the tool.", [("get_weather", {"city": "Lima"})]),
    ("markup_in_value", None, None, [("search_docs", {"query": "a < b && c > d \"quoted\" \\ back"})]),
]


def model_text(template, bos, eos, user, assistant, dialect):
    """What the model writes after the generation prompt, per the template."""
    prefix = render(template, [user], TOOLS, {}, True, bos, eos)
    full = render(template, [user, assistant], TOOLS, {}, False, bos, eos)
    # The generation prompt, less an opening <think> the history renders closed.
    if full.startswith(prefix):
        n = len(prefix)
    elif prefix.endswith("<think>") and full.startswith(prefix[: -len("<think>")]):
        n = len(prefix) - len("<think>")
    else:
        raise ValueError("the rendered turn does not extend the generation prompt")
    text = full[n:]
    for end in (eos, "<|im_end|>\n", "<|eot_id|>"):
        if end and text.endswith(end):
            text = text[: -len(end)]
    if text.endswith("\n") and dialect in ("hermes",):
        text = text.rstrip("\n")
    return prefix, text


def generated_cases():
    cases = []
    for template_name, (dialect, string_args) in DIALECTS.items():
        bos, eos = TEMPLATES[template_name]
        with open(os.path.join(GOLDEN, "templates", template_name), encoding="utf-8") as f:
            template = f.read()
        for name, content, reasoning, calls in TURNS:
            if dialect == "llama3_json" and (len(calls) != 1 or content):
                continue  # Llama-3.1's template renders one call and no content
            if content is None and dialect == "hermes":
                content = ""  # Qwen3's template reads message.content unconditionally
            assistant = {"role": "assistant", "content": content,
                         "tool_calls": [call(n, a, f"c{i}", as_string=string_args) for i, (n, a) in enumerate(calls)]}
            if reasoning:
                assistant["reasoning_content"] = reasoning
            user = {"role": "user", "content": "Please help."}
            try:
                prefix, text = model_text(template, bos, eos, user, copy.deepcopy(assistant), dialect)
            except Exception as e:  # noqa: BLE001 - some templates refuse some turns
                print(f"skip {template_name}/{name}: {type(e).__name__}: {e}")
                continue
            cases.append({
                "name": f"{template_name}/{name}", "dialect": dialect, "tools": TOOLS,
                "starts_in_reasoning": prefix.rstrip().endswith("<think>"), "text": text,
                "check_content": False,
                "expected_calls": [{"name": n, "arguments": json.dumps(a, ensure_ascii=False)} for n, a in calls],
            })
    return cases


def hand(name, dialect, text, calls, content=None, reasoning=None, starts=False):
    return {"name": "hand/" + name, "dialect": dialect, "tools": TOOLS, "starts_in_reasoning": starts,
            "text": text, "check_content": True, "expected_content": content or "",
            "expected_reasoning": reasoning or "",
            "expected_calls": [{"name": n, "arguments": json.dumps(a, ensure_ascii=False)} for n, a in calls]}


def hand_cases():
    w = "get_weather"
    return [
        hand("glm45_two_calls", "glm45",
             "\n<think>I should look.</think>\nChecking both.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n"
             "<arg_value>Oslo</arg_value>\n</tool_call>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n"
             "<arg_value>Rome</arg_value>\n<arg_key>unit</arg_key>\n<arg_value>celsius</arg_value>\n</tool_call>",
             [(w, {"city": "Oslo"}), (w, {"city": "Rome", "unit": "celsius"})],
             content="\nChecking both.\n", reasoning="I should look."),
        hand("glm47_zero_args", "glm47", "</think><tool_call>get_time</tool_call>", [("get_time", {})], starts=True),
        hand("glm47_typed", "glm47",
             "plan</think>Sure.<tool_call>search_docs<arg_key>query</arg_key><arg_value>true</arg_value>"
             "<arg_key>limit</arg_key><arg_value>3</arg_value><arg_key>filters</arg_key>"
             "<arg_value>{\"lang\": [\"en\"]}</arg_value><arg_key>extra</arg_key><arg_value>not json</arg_value>"
             "</tool_call>",
             [("search_docs", {"query": "true", "limit": 3, "filters": {"lang": ["en"]}, "extra": "not json"})],
             content="Sure.", reasoning="plan", starts=True),
        hand("glm47_lookalikes", "glm47",
             "</think>Use <tool or <tool_ca and </think> freely.", [],
             content="Use <tool or <tool_ca and </think> freely.", starts=True),
        hand("glm47_unterminated", "glm47",
             "</think><tool_call>get_weather<arg_key>city</arg_key><arg_value>Nice</arg_value>",
             [(w, {"city": "Nice"})], starts=True),
        hand("glm47_multiline_value", "glm47",
             "</think><tool_call>search_docs<arg_key>query</arg_key><arg_value>line1\nline2 <b>x</b></arg_value>"
             "</tool_call>", [("search_docs", {"query": "line1\nline2 <b>x</b>"})], starts=True),
        hand("hermes_two", "hermes",
             "<think>\nthink\n</think>\n\nOK.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Köln\"}}\n"
             "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
             [(w, {"city": "Köln"}), ("get_time", {})], content="\n\nOK.\n", reasoning="\nthink\n"),
        hand("hermes_bad_json_is_content", "hermes", "<tool_call>{not json}</tool_call> after", [],
             content="<tool_call>{not json}</tool_call> after"),
        hand("llama3_python_tag", "llama3_json",
             "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Bern\"}}; "
             "{\"name\": \"get_time\", \"parameters\": {}}",
             [(w, {"city": "Bern"}), ("get_time", {})]),
        hand("llama3_plain_text", "llama3_json", "The weather is {probably} fine.", [],
             content="The weather is {probably} fine."),
        hand("deepseek_v31", "deepseek_v3",
             "Sure<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Kyiv\"}"
             "<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
             [(w, {"city": "Kyiv"}), ("get_time", {})], content="Sure"),
        hand("deepseek_v3_markdown", "deepseek_v3",
             "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
             "{\"city\": \"Porto\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", [(w, {"city": "Porto"})]),
        hand("reasoning_unterminated", "none", "still thinking", [], reasoning="still thinking", starts=True),
        hand("no_reasoning_marker", "none", "  plain answer <think> late", [],
             content="  plain answer <think> late"),
    ]


def main():
    cases = generated_cases() + hand_cases()
    with open(os.path.join(GOLDEN, "tool_calls.golden.json"), "w", encoding="utf-8") as f:
        json.dump({"note": "generated by tools/gen_tool_call_golden.py", "cases": cases}, f,
                  ensure_ascii=False, indent=1)
        f.write("\n")
    by = {}
    for c in cases:
        by[c["dialect"]] = by.get(c["dialect"], 0) + 1
    print(len(cases), "cases", by)


if __name__ == "__main__":
    sys.exit(main())
