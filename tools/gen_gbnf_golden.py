#!/usr/bin/env python3
"""Writes tests/golden/chat/gbnf_cases.json: for every grammar of
tests/golden/chat/gbnf/*.gbnf, texts labelled by Lark (tools/gbnf_lark.py) as
"accept", "prefix" (a proper prefix of some sentence) or "reject".

The texts are random derivations of the grammar, their truncations, and
single-character edits of both (insertions, deletions, replacements drawn
from ASCII, controls and multi-byte characters); the labels are Lark's alone,
so a wrong derivation only changes which label a text gets. The C++ test
(tests/chat/gbnf_grammar_test.cc) must give the same label to every text.

    /work/venv-ref/bin/python tools/gen_gbnf_golden.py
"""
import glob
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gbnf_lark import Recognizer, parse_gbnf  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
GRAMMARS = os.path.join(ROOT, "tests", "golden", "chat", "gbnf")
OUT = os.path.join(ROOT, "tests", "golden", "chat", "gbnf_cases.json")
POOL = [chr(c) for c in range(0x20, 0x7F)] + list("\n\t\x01é中и😀こ€")
PER_GRAMMAR = 48


class Sampler:
    def __init__(self, rules, rng):
        self.rules, self.rng = rules, rng
        self.short = self._shortest()

    def _shortest(self):
        best = {}
        for _ in range(len(self.rules) + 2):
            for n, e in self.rules.items():
                s = self._short(e, best)
                if s is not None and (n not in best or len(s) < len(best[n])):
                    best[n] = s
        return best

    def _short(self, e, best):
        k = e[0]
        if k == "alt":
            opts = [self._short(s, best) for s in e[1]]
            opts = [o for o in opts if o is not None]
            return min(opts, key=len) if opts else None
        if k == "seq":
            out = ""
            for x in e[1]:
                s = self._short(x, best)
                if s is None:
                    return None
                out += s
            return out
        if k == "chars":
            return self._char(e)
        if k == "ref":
            return best.get(e[1])
        if k == "rep":
            s = self._short(e[1], best)
            return None if s is None else s * e[2]
        raise AssertionError(k)

    def _char(self, e):
        neg, ranges = e[1], e[2]
        inside = lambda c: any(lo <= ord(c) <= hi for lo, hi in ranges)  # noqa: E731
        if neg:
            return next(c for c in POOL if not inside(c))
        lo, hi = ranges[0]
        return chr(lo)

    def sample(self, e, depth=0):
        k = e[0]
        if k == "alt":
            return self.sample(self.rng.choice(e[1]), depth)
        if k == "seq":
            return "".join(self.sample(x, depth) for x in e[1])
        if k == "chars":
            neg, ranges = e[1], e[2]
            if neg:
                options = [c for c in POOL if not any(lo <= ord(c) <= hi for lo, hi in ranges)]
                return self.rng.choice(options)
            lo, hi = self.rng.choice(ranges)
            return chr(self.rng.randint(lo, min(hi, lo + 200)))
        if k == "ref":
            if depth > 6:
                return self.short[e[1]]
            return self.sample(self.rules[e[1]], depth + 1)
        if k == "rep":
            lo, hi = e[2], e[3]
            top = lo + 3 if hi is None else min(hi, lo + 3)
            return "".join(self.sample(e[1], depth) for _ in range(self.rng.randint(lo, top)))
        raise AssertionError(k)


def mutate(text, rng):
    i = rng.randint(0, len(text))
    op = rng.choice(["insert", "delete", "replace"]) if text else "insert"
    if op == "insert":
        return text[:i] + rng.choice(POOL) + text[i:]
    i = min(i, len(text) - 1)
    if op == "delete":
        return text[:i] + text[i + 1:]
    return text[:i] + rng.choice(POOL) + text[i + 1:]


def main():
    rng = random.Random(49)
    out = []
    totals = {"accept": 0, "prefix": 0, "reject": 0}
    for path in sorted(glob.glob(os.path.join(GRAMMARS, "*.gbnf"))):
        text = open(path, encoding="utf-8").read()
        rules = parse_gbnf(text)
        rec = Recognizer(text)
        sampler = Sampler(rules, rng)
        seen, cases = set(), []
        counts = {"accept": 0, "prefix": 0, "reject": 0}
        want = PER_GRAMMAR // 3
        for _ in range(4000):
            if len(cases) >= PER_GRAMMAR:
                break
            s = sampler.sample(rules["root"])
            kind = rng.random()
            if kind < 0.3:
                s = s[: rng.randint(0, len(s))]
            elif kind < 0.7:
                s = mutate(s, rng)
            if s in seen or len(s) > 400:
                continue
            label = rec.label(s)
            if counts[label] >= want + (PER_GRAMMAR - 3 * want if label == "accept" else 0):
                continue
            seen.add(s)
            counts[label] += 1
            cases.append({"text": s, "label": label})
        for k in totals:
            totals[k] += counts[k]
        out.append({"grammar": os.path.basename(path), "cases": cases})
        print("%-16s %s" % (os.path.basename(path), counts))
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote", OUT, totals)


if __name__ == "__main__":
    main()
