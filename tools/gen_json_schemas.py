#!/usr/bin/env python3
"""Generates random JSON schemas in the subset constrained decoding supports
(docs/chat.md) for the structured-output checks: nested objects with required
and optional properties, arrays with minItems/maxItems, strings with length
limits, integers, numbers, booleans, null, enum, const, anyOf, type lists and
$defs references. Seeded, so the file is reproducible.

Writes tests/golden/chat/json_schemas.json (a list of schemas); checked by
tests/chat/json_constraint_test.cc (random tokens) and
tools/check_json_outputs.py (real models through `anymoe run --json-schema`,
validated with jsonschema).

Usage: tools/.venv/bin/python tools/gen_json_schemas.py [COUNT]
"""

import json
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "golden", "chat", "json_schemas.json")

WORDS = ["name", "age", "city", "tags", "score", "active", "id", "items", "note", "kind", "value",
         "size", "email", "title", "count", "ratio", "label", "path", "ok", "données", "名前"]


def leaf(rng):
    r = rng.random()
    if r < 0.25:
        s = {"type": "string"}
        if rng.random() < 0.4:
            lo = rng.randint(0, 3)
            s["minLength"] = lo
            s["maxLength"] = lo + rng.randint(0, 12)
        return s
    if r < 0.4:
        return {"type": "integer"}
    if r < 0.5:
        return {"type": "number"}
    if r < 0.6:
        return {"type": "boolean"}
    if r < 0.65:
        return {"type": "null"}
    if r < 0.78:
        pool = ["red", "green", "blue", "ünï", 1, 2.5, True, None, "a\"q", "x y"]
        return {"enum": rng.sample(pool, rng.randint(1, 4))}
    if r < 0.84:
        return {"const": rng.choice(["fixed", 7, False, "ok"])}
    if r < 0.92:
        return {"type": rng.sample(["string", "integer", "null", "boolean"], 2)}
    return {"anyOf": [leaf(rng), leaf(rng)]}


def schema(rng, depth):
    if depth <= 0 or rng.random() < 0.35:
        return leaf(rng)
    if rng.random() < 0.35:
        s = {"type": "array", "items": schema(rng, depth - 1)}
        if rng.random() < 0.6:
            lo = rng.randint(0, 2)
            s["minItems"] = lo
            s["maxItems"] = lo + rng.randint(0, 3)
        return s
    return obj(rng, depth)


def obj(rng, depth):
    keys = rng.sample(WORDS, rng.randint(1, 5))
    props = {k: schema(rng, depth - 1) for k in keys}
    s = {"type": "object", "properties": props,
         "required": [k for k in keys if rng.random() < 0.7]}
    if rng.random() < 0.7:
        s["additionalProperties"] = False
    if rng.random() < 0.2:
        s["description"] = "an annotation that is ignored"
    return s


def shortest(s, defs):
    """Length of the shortest compact JSON the schema accepts (as the C++ compiler sees it)."""
    if "$ref" in s:
        return shortest(defs[s["$ref"].split("/")[-1]], defs)
    if "const" in s:
        return len(json.dumps(s["const"], ensure_ascii=False, separators=(",", ":")))
    if "enum" in s:
        return min(len(json.dumps(v, ensure_ascii=False, separators=(",", ":"))) for v in s["enum"])
    if "anyOf" in s:
        return min(shortest(a, defs) for a in s["anyOf"])
    t = s.get("type")
    if isinstance(t, list):
        return min(shortest({**s, "type": x}, defs) for x in t)
    if t == "object":
        req = [k for k in s["properties"] if k in s.get("required", [])]
        return 2 + sum(len(json.dumps(k, ensure_ascii=False)) + 1 + shortest(s["properties"][k], defs)
                       for k in req) + max(0, len(req) - 1)
    if t == "array":
        n = s.get("minItems", 0)
        return 2 + n * shortest(s["items"], defs) + max(0, n - 1)
    if t == "string":
        return 2 + s.get("minLength", 0)
    return {"integer": 1, "number": 1, "boolean": 4, "null": 4}[t]


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    rng = random.Random(20260923)
    out = []
    while len(out) < count:
        i = len(out)
        s = obj(rng, rng.randint(1, 3))
        if i % 10 == 3:  # a $defs reference
            s = {"$defs": {"inner": obj(rng, 1)}, "type": "object",
                 "properties": {"first": {"$ref": "#/$defs/inner"}, "second": {"$ref": "#/$defs/inner"}},
                 "required": ["first"], "additionalProperties": False}
        if shortest(s, s.get("$defs", {})) > 60:
            continue  # keep every document closable within a tiny model's context
        out.append(s)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(len(out), "schemas ->", OUT)


if __name__ == "__main__":
    sys.exit(main())
