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
PYDANTIC_OUT = os.path.join(ROOT, "tests", "golden", "chat", "json_schemas_pydantic.json")
CASES_OUT = os.path.join(ROOT, "tests", "golden", "chat", "json_keyword_cases.json")

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


# ---- Pydantic corpus: the schemas agents send (issue 54) -------------------

def pydantic_field_pool():
    """(name, annotation, default or ...) triples covering what Pydantic emits."""
    from datetime import date, datetime, time, timedelta
    from enum import Enum
    from ipaddress import IPv4Address, IPv6Address
    from typing import Annotated, Literal, Optional, Union
    from uuid import UUID

    from pydantic import AnyUrl, BaseModel, EmailStr, Field, confloat, conint, conlist, constr

    class Color(str, Enum):
        red = "red"
        green = "green"
        blue = "blue"

    class Level(int, Enum):
        low = 1
        high = 2

    class Address(BaseModel):
        street: constr(min_length=1, max_length=20)
        zip: Annotated[str, Field(pattern=r"^\d{5}(-\d{4})?$")]
        country: Literal["US", "CA", "MX"] = "US"

    class Cat(BaseModel):
        kind: Literal["cat"]
        lives: conint(ge=0, le=9)

    class Dog(BaseModel):
        kind: Literal["dog"]
        bark: confloat(gt=0, lt=1.5)

    class Bird(BaseModel):
        kind: Literal["bird"]
        wingspan_cm: Annotated[int, Field(ge=1, le=300)]
        can_talk: bool = False

    class Tree(BaseModel):
        value: conint(ge=-100, le=100)
        children: list["Tree"] = []

    class Comment(BaseModel):
        author: constr(pattern=r"^[a-z][a-z0-9_]{2,11}$")
        text: constr(max_length=30)
        replies: Optional[list["Comment"]] = None

    class Point(BaseModel):
        x: confloat(ge=-1000, le=1000)
        y: confloat(ge=-1000, le=1000)

    Pet = Annotated[Union[Cat, Dog, Bird], Field(discriminator="kind")]
    pool = [
        ("age", Annotated[int, Field(ge=0, le=120)], ...),
        ("count", conint(gt=0), ...),
        ("offset", conint(ge=-50, lt=50), 0),
        ("big", conint(ge=1000000, le=999999999999), ...),
        ("negative", conint(lt=0), ...),
        ("step", conint(multiple_of=5, ge=0, le=1000), ...),
        ("even", conint(multiple_of=2), ...),
        ("ratio", confloat(ge=0, le=1), ...),
        ("temperature", confloat(gt=-273.15, lt=1000.5), ...),
        ("price", confloat(gt=0), ...),
        ("delta", confloat(ge=-0.5, le=0.25), ...),
        ("score", Annotated[float, Field(ge=0.0, le=100.0)], 50.0),
        ("code", constr(pattern=r"^[A-Z]{3}-\d{3}$"), ...),
        ("slug", constr(pattern=r"^[a-z0-9]+(?:-[a-z0-9]+)*$", max_length=24), ...),
        ("phone", constr(pattern=r"^\+?[0-9]{7,12}$"), ...),
        ("hexcolor", constr(pattern=r"^#(?:[0-9a-fA-F]{3}){1,2}$"), ...),
        ("word", constr(pattern=r"[a-z]+", min_length=2, max_length=10), ...),
        ("version", constr(pattern=r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$"), ...),
        ("name", constr(min_length=1, max_length=16), ...),
        ("nickname", Optional[constr(max_length=8)], None),
        ("created", datetime, ...),
        ("birthday", date, ...),
        ("alarm", time, ...),
        ("timeout", timedelta, ...),
        ("id", UUID, ...),
        ("email", EmailStr, ...),
        ("homepage", AnyUrl, ...),
        ("ipv4", IPv4Address, ...),
        ("ipv6", IPv6Address, ...),
        ("host", Annotated[str, Field(json_schema_extra={"format": "hostname"})], ...),
        ("color", Color, ...),
        ("level", Level, Level.low),
        ("mode", Literal["fast", "slow", "auto"], "auto"),
        ("flag", Literal[True], True),
        ("active", bool, ...),
        ("nothing", None, None),
        ("note", Optional[str], None),
        ("maybe_age", Optional[conint(ge=0, le=150)], None),
        ("tags", conlist(constr(max_length=8), min_length=1, max_length=3), ...),
        ("scores", conlist(conint(ge=0, le=10), max_length=4), []),
        ("matrix", conlist(conlist(int, min_length=2, max_length=2), max_length=2), []),
        ("labels", dict[str, int], {}),
        ("by_key", dict[constr(pattern=r"^[a-z]{1,6}$"), confloat(ge=0, le=1)], {}),
        ("pair", tuple[int, str], ...),
        ("triple", tuple[Color, bool, conint(ge=0, le=3)], ...),
        ("address", Address, ...),
        ("home", Optional[Address], None),
        ("pet", Pet, ...),
        ("pets", conlist(Pet, max_length=2), []),
        ("tree", Tree, ...),
        ("thread", Comment, ...),
        ("where", Point, ...),
        ("either", Union[conint(ge=0, le=9), constr(pattern=r"^[a-z]{2}$")], ...),
        ("described", Annotated[Address, Field(description="where the parcel goes")], ...),
    ]
    return pool


def pydantic_corpus(count):
    from typing import Optional

    from pydantic import BaseModel, Field, create_model

    rng = random.Random(20261207)
    pool = pydantic_field_pool()
    out = []
    # One model per pool entry first (every feature alone), then random mixes.
    for i, (name, ann, default) in enumerate(pool):
        out.append(create_model(f"Single{i}", **{name: (ann, default)}).model_json_schema())
    nested = []
    while len(out) < count:
        i = len(out)
        fields = {}
        for name, ann, default in rng.sample(pool, rng.randint(2, 4)):
            if rng.random() < 0.15 and default is ...:
                ann, default = Optional[ann], None
            fields[name] = (ann, default)
        if nested and rng.random() < 0.3:
            inner = rng.choice(nested)
            fields["inner"] = (inner, Field(description="a nested model") if rng.random() < 0.5 else ...)
        if rng.random() < 0.2:
            fields["extra"] = (Optional[list[int]], None)
        model = create_model(f"Mix{i}", **fields)
        if rng.random() < 0.3:
            nested.append(model)
        if rng.random() < 0.15:
            model.model_config["extra"] = "forbid"
            model.model_rebuild(force=True)
        out.append(model.model_json_schema())
    return out


# ---- Accept / reject tables for the keyword automata, decided by jsonschema --

def keyword_cases():
    """Schemas of one keyword each with candidate documents; 'valid' comes from
    Python's jsonschema (with format checking), never from anymoe."""
    import jsonschema

    ints = [str(v) for v in [-1001, -1000, -999, -120, -101, -100, -99, -51, -50, -49, -10, -9, -1, 0, 1, 2, 3,
                             5, 7, 9, 10, 11, 15, 99, 100, 101, 119, 120, 121, 999, 1000, 1001, 123456789,
                             999999999999999]] + ["-0", "01", "1.0", "1e2", "+1", "00"]
    nums = ints + ["0.5", "-0.5", "0.25", "0.2500001", "-0.2499", "0.999", "1.5", "1.49999", "-273.15",
                   "-273.14", "-273.16", "1000.5", "1000.49", "0.0", "0.000001", "-0.0", "3.14159",
                   "1e-3", "0.", ".5", "1.2.3"]
    schemas = [
        ({"type": "integer", "minimum": 0, "maximum": 120}, ints),
        ({"type": "integer", "exclusiveMinimum": 0}, ints),
        ({"type": "integer", "minimum": -50, "exclusiveMaximum": 50}, ints),
        ({"type": "integer", "maximum": -1}, ints),
        ({"type": "integer", "minimum": -1000, "maximum": -100}, ints),
        ({"type": "integer", "minimum": 1.5, "maximum": 9.5}, ints),
        ({"type": "integer", "multipleOf": 5}, ints),
        ({"type": "integer", "multipleOf": 3, "minimum": -10, "maximum": 100}, ints),
        ({"type": "number", "minimum": 0, "maximum": 1}, nums),
        ({"type": "number", "exclusiveMinimum": 0}, nums),
        ({"type": "number", "exclusiveMinimum": -273.15, "exclusiveMaximum": 1000.5}, nums),
        ({"type": "number", "minimum": -0.5, "maximum": 0.25}, nums),
        ({"type": "number", "maximum": -0.5}, nums),
        ({"type": "number", "exclusiveMaximum": 1.5, "exclusiveMinimum": 0}, nums),
    ]
    strs = ["", "a", "ab", "abc", "ABC-123", "AB-123", "abc-123", "x-y-z", "-x", "x--y", "#fff", "#ffffff",
            "#ffff", "fff", "+1234567", "123456", "12345", "12345-6789", "12345-678", "1.2.3", "v1.20.3",
            "01.2.3", "hello", "héllo", "a b", "aaaaaaaaaaaa", "Zebra", "_x", "a_bc", "ab1", "abcdefghijkl",
            "abcdefghijklm", "a|b", "ac", "abbbc", "aXc", "a1", "日本"]
    patterns = [r"^[A-Z]{3}-\d{3}$", r"^[a-z0-9]+(?:-[a-z0-9]+)*$", r"^#(?:[0-9a-fA-F]{3}){1,2}$",
                r"^\+?[0-9]{7,12}$", r"^\d{5}(-\d{4})?$", r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$",
                r"[a-z]+", r"^[a-z][a-z0-9_]{2,11}$", r"^(ab|c)+$", r"b", r"^a.c$", r"^[^a-z]*$", r"^a?b*c+$",
                r"^\w+$", r"^\S{2}$", r"^(a|b)*$", r"^[a-c]{2,3}$"]
    for p in patterns:
        schemas.append(({"type": "string", "pattern": p}, [json.dumps(s, ensure_ascii=False) for s in strs]))
    schemas.append(({"type": "string", "pattern": "[a-z]+", "minLength": 2, "maxLength": 4},
                    [json.dumps(s, ensure_ascii=False) for s in strs]))
    fmt_values = {
        "date": ["2024-02-28", "2024-02-30", "2024-13-01", "1999-12-31", "2024-2-1", "20240101", "2023-04-31"],
        "time": ["12:34:56Z", "23:59:59+01:00", "24:00:00Z", "12:34:56", "12:34:56.123Z", "12:60:00Z"],
        "date-time": ["2024-01-01T00:00:00Z", "2024-01-01T00:00:00.5+05:30", "2024-01-01 00:00:00Z",
                      "2024-01-01T25:00:00Z", "2024-01-01T00:00:00"],
        "duration": ["P1D", "PT1H", "P1Y2M3DT4H5M6S", "P", "PT", "P1W", "1D", "P1DT"],
        "uuid": ["123e4567-e89b-12d3-a456-426614174000", "123e4567e89b12d3a456426614174000",
                 "123E4567-E89B-12D3-A456-426614174000", "123e4567-e89b-12d3-a456-42661417400"],
        "email": ["a@b.co", "first.last@example.com", "no-at-sign", "x@y"],
        "ipv4": ["127.0.0.1", "255.255.255.255", "256.1.1.1", "1.2.3", "01.2.3.4", "0.0.0.0"],
        "ipv6": ["::1", "::", "2001:db8::8a2e:370:7334", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9", "12345::",
                 "fe80::1:2"],
        "hostname": ["example.com", "a", "my-host.local", "-bad.com", "bad-.com", "a..b", "x_y.com"],
        "uri": ["https://example.com/a/b?c=d#e", "http://x.org", "mailto:a@b.co", "no scheme", "//x.org",
                "ftp://h:21/p"],
    }
    for fmt, values in fmt_values.items():
        schemas.append(({"type": "string", "format": fmt}, [json.dumps(v) for v in values]))
    schemas += [
        ({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False},
         ['[]', '[1]', '[1,"a"]', '["a",1]', '[1,"a",2]', '[1,2]']),
        ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
          "minProperties": 1, "maxProperties": 1, "additionalProperties": False},
         ['{}', '{"a":1}', '{"b":2}', '{"a":1,"b":2}']),
        ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
          "dependentRequired": {"a": ["b"]}, "additionalProperties": False},
         ['{}', '{"a":1}', '{"b":2}', '{"a":1,"b":2}']),
        ({"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
         ['{}', '{"x":1}', '{"x":-1}', '{"x":1,"y":"a"}']),
        ({"type": "object", "propertyNames": {"pattern": "^[a-z]{1,3}$"}},
         ['{}', '{"ab":1}', '{"abcd":1}', '{"A":true}']),
        ({"oneOf": [{"type": "integer"}, {"type": "string"}]}, ['1', '"a"', 'true', '1.5']),
        ({"allOf": [{"type": "integer", "minimum": 0}, {"maximum": 10}]}, ['0', '10', '11', '-1']),
    ]
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    out = []
    for schema, texts in schemas:
        validator = jsonschema.Draft202012Validator(schema, format_checker=checker)
        cases = []
        for t in texts:
            try:
                v = json.loads(t)
            except ValueError:
                cases.append([t, False])  # not JSON at all
                continue
            cases.append([t, validator.is_valid(v)])
        out.append({"schema": schema, "cases": cases})
    return out


def write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(len(value), "entries ->", path)


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
    write_json(OUT, out)
    write_json(PYDANTIC_OUT, pydantic_corpus(320))
    write_json(CASES_OUT, keyword_cases())


if __name__ == "__main__":
    sys.exit(main())
