#!/usr/bin/env python3
"""Structured output end to end: runs `anymoe run --json-schema` for every
schema of tests/golden/chat/json_schemas.json (or --schemas FILE, e.g. the
Pydantic corpus json_schemas_pydantic.json) on a model and checks with
Python's json and jsonschema (Draft 2020-12, with format checking) that each
output parses and validates.

Usage (from the repo root, after building):
  tools/.venv/bin/python tools/check_json_outputs.py -m models/SmolLM2-135M-Instruct.Q4_1.gguf
  tools/.venv/bin/python tools/check_json_outputs.py -m tests/golden/moe/glm_moe_dsa --temp 1 \
      --short-prompt -n 100
  tools/.venv/bin/python tools/check_json_outputs.py -m models/SmolLM2-135M-Instruct.Q4_1.gguf \
      --schemas tests/golden/chat/json_schemas_pydantic.json --stride 8 --temp 1 --seeds 5 -n 320
Prints the pass rate and exits non-zero unless every output passes.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import jsonschema

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "src", "anymoe"))
    ap.add_argument("--schemas", default=os.path.join(ROOT, "tests", "golden", "chat", "json_schemas.json"))
    ap.add_argument("-n", "--max-tokens", type=int, default=160)
    ap.add_argument("--temp", default="0.8")
    ap.add_argument("--limit", type=int, default=0, help="check only the first N schemas")
    ap.add_argument("--stride", type=int, default=1, help="check every Nth schema")
    ap.add_argument("--seeds", type=int, default=1, help="runs per schema, each with its own seed")
    ap.add_argument("-t", "--threads", default="2")
    ap.add_argument("--short-prompt", action="store_true",
                    help="a one-line prompt without the schema (models with a tiny context)")
    args = ap.parse_args()
    with open(args.schemas, encoding="utf-8") as f:
        schemas = json.load(f)
    if args.limit:
        schemas = schemas[: args.limit]
    runs = [(i, schemas[i], k) for i in range(0, len(schemas), args.stride) for k in range(args.seeds)]
    # The 2020-12 checker: a bare FormatChecker() mixes drafts (its "time" is draft 3's hh:mm:ss).
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    passed = 0
    failures = []
    # Schemas whose shortest document is longer than the tokens the model's
    # context leaves (the tiny goldens have 128 positions): anymoe refuses
    # them by name (json_schema_no_room); listed, never counted as passes.
    no_room = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, schema, k in runs:
            path = os.path.join(tmp, f"s{i}.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(schema, f, ensure_ascii=False)
            prompt = "Reply with JSON for this schema: " + json.dumps(schema, ensure_ascii=False)
            if args.short_prompt:
                prompt = "Reply with JSON."
            cmd = [args.binary, "run", "-m", args.model, "--chat", "-p", prompt, "--json-schema", path,
                   "-n", str(args.max_tokens), "--temp", args.temp, "--seed", str(i * 100 + k), "-t", args.threads]
            r = subprocess.run(cmd, capture_output=True)
            text = r.stdout.decode("utf-8", errors="replace").rstrip("\n")
            err = r.stderr.decode(errors="replace")
            if r.returncode != 0 and "tokens remain (max_tokens or the context)" in err:
                no_room.append(i)
                continue
            try:
                r.stdout.decode("utf-8", errors="strict")
                if r.returncode != 0:
                    raise RuntimeError(err.strip())
                value = json.loads(text)
                jsonschema.Draft202012Validator(schema, format_checker=checker).validate(value)
                passed += 1
            except Exception as e:  # noqa: BLE001 - every failure is reported
                failures.append((i, type(e).__name__, str(e)[:200], text[:200]))
    print(f"{args.model} --temp {args.temp}: {passed}/{len(runs) - len(no_room)} outputs parse and validate "
          f"({len(runs) // args.seeds} schemas x {args.seeds} seeds)")
    if no_room:
        print(f"  {len(no_room)} runs not made: the schema's shortest document does not fit the context "
              f"(schemas {sorted(set(no_room))})")
    for f in failures[:10]:
        print("  FAIL", f)
    return 0 if passed == len(runs) - len(no_room) else 1


if __name__ == "__main__":
    sys.exit(main())
