#!/usr/bin/env python3
"""GBNF (llama.cpp's grammar notation) translated to a Lark grammar, and a
recognizer on Lark's Earley parser: the independent reference the C++ GBNF
constraint (src/chat/gbnf_grammar.*, grammar_constraint.*) is tested against.

Every terminal becomes a one-character regular expression, so Lark's dynamic
Earley lexer reads the text character by character; Earley is prefix-correct,
so a text is labelled "accept" (a sentence), "prefix" (Lark stops with
UnexpectedEOF: some continuation is a sentence) or "reject" (Lark stops at a
character: UnexpectedCharacters). This parser of the notation is written
from llama.cpp's grammars/README.md, separately from the C++ one.

    python tools/gbnf_lark.py GRAMMAR.gbnf TEXT...   # prints a label per text
"""
import sys

from lark import Lark
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF

WORD = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-"}


class GbnfSyntaxError(ValueError):
    pass


class _Reader:
    def __init__(self, text):
        self.t, self.i = text, 0

    def peek(self, k=0):
        j = self.i + k
        return self.t[j] if j < len(self.t) else ""

    def space(self, newlines):
        while self.i < len(self.t):
            c = self.t[self.i]
            if c in " \t" or (newlines and c in "\r\n"):
                self.i += 1
            elif c == "#":
                while self.i < len(self.t) and self.t[self.i] not in "\r\n":
                    self.i += 1
            else:
                break

    def char(self):
        c = self.peek()
        if c == "\\":
            e = self.peek(1)
            self.i += 2
            if e in ESCAPES:
                return ESCAPES[e]
            width = {"x": 2, "u": 4, "U": 8}.get(e)
            if width is None:
                raise GbnfSyntaxError("unknown escape \\" + e)
            digits = self.t[self.i:self.i + width]
            if len(digits) != width or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise GbnfSyntaxError("bad hex escape")
            self.i += width
            return chr(int(digits, 16))
        if not c:
            raise GbnfSyntaxError("unexpected end")
        self.i += 1
        return c


def parse_gbnf(text):
    """{rule name: expression}; expressions are tuples:
    ("alt", [seq...]), ("seq", [expr...]), ("chars", negated, [(lo, hi)...]),
    ("ref", name), ("rep", expr, min, max or None)."""
    r = _Reader(text)
    rules = {}

    def alternatives(nested):
        alts = [sequence(nested)]
        while r.peek() == "|":
            r.i += 1
            r.space(True)
            alts.append(sequence(nested))
        return ("alt", alts)

    def sequence(nested):
        items = []
        while True:
            c = r.peek()
            if c == '"':
                r.i += 1
                chars = []
                while r.peek() != '"':
                    if r.peek() in ("", "\n", "\r"):
                        raise GbnfSyntaxError("unterminated string")
                    chars.append(r.char())
                r.i += 1
                items.append(("seq", [("chars", False, [(ord(ch), ord(ch))]) for ch in chars]))
            elif c == "[":
                r.i += 1
                neg = r.peek() == "^"
                if neg:
                    r.i += 1
                ranges = []
                while r.peek() != "]":
                    if not r.peek():
                        raise GbnfSyntaxError("unterminated class")
                    lo = r.char()
                    hi = lo
                    if r.peek() == "-" and r.peek(1) not in ("]", ""):
                        r.i += 1
                        hi = r.char()
                    ranges.append((ord(lo), ord(hi)))
                r.i += 1
                items.append(("chars", neg, ranges))
            elif c == ".":
                r.i += 1
                items.append(("chars", False, [(0, 0x10FFFF)]))
            elif c and c in WORD:
                j = r.i
                while r.peek() and r.peek() in WORD:
                    r.i += 1
                items.append(("ref", r.t[j:r.i]))
            elif c == "(":
                r.i += 1
                r.space(True)
                inner = alternatives(True)
                if r.peek() != ")":
                    raise GbnfSyntaxError("expected )")
                r.i += 1
                items.append(inner)
            elif c in ("*", "+", "?", "{"):
                if not items:
                    raise GbnfSyntaxError("nothing to repeat")
                r.i += 1
                last = items.pop()
                if c == "*":
                    items.append(("rep", last, 0, None))
                elif c == "+":
                    items.append(("rep", last, 1, None))
                elif c == "?":
                    items.append(("rep", last, 0, 1))
                else:
                    body = r.t[r.i:r.t.index("}", r.i)].replace(" ", "")
                    r.i = r.t.index("}", r.i) + 1
                    if "," in body:
                        a, b = body.split(",")
                        items.append(("rep", last, int(a or 0), int(b) if b else None))
                    else:
                        items.append(("rep", last, int(body), int(body)))
            else:
                break
            r.space(nested)
        return ("seq", items)

    r.space(True)
    while r.i < len(r.t):
        j = r.i
        while r.peek() and r.peek() in WORD:
            r.i += 1
        name = r.t[j:r.i]
        if not name:
            raise GbnfSyntaxError("expected a rule name at %d" % r.i)
        r.space(False)
        if r.t[r.i:r.i + 3] != "::=":
            raise GbnfSyntaxError("expected ::=")
        r.i += 3
        r.space(True)
        if name in rules:
            raise GbnfSyntaxError("rule defined twice: " + name)
        rules[name] = alternatives(False)
        if r.peek() not in ("", "\n", "\r"):
            raise GbnfSyntaxError("unexpected %r" % r.peek())
        r.space(True)
    if "root" not in rules:
        raise GbnfSyntaxError("no root")
    return rules


def _lark_chars(neg, ranges):
    # Lark turns \UXXXXXXXX into the character before the regex engine sees
    # it, and passes "\\x" through: the set's own metacharacters (and the
    # literal's "/") are backslash-escaped, everything else is spelt \U.
    def cp(v):
        c = chr(v)
        if c in "\\]^-[":
            return "\\" + c
        if c == "/":
            return "\\/"
        return "\\U%08x" % v

    body = "".join(cp(lo) if lo == hi else cp(lo) + "-" + cp(hi) for lo, hi in ranges)
    return "/[%s%s]/s" % ("^" if neg else "", body)


def to_lark(rules):
    names = {n: "r%d" % i for i, n in enumerate(rules)}

    def expr(e):
        kind = e[0]
        if kind == "alt":
            return "(" + " | ".join(expr(s) for s in e[1]) + ")"
        if kind == "seq":
            parts = [expr(x) for x in e[1]]
            parts = [p for p in parts if p]
            return "(" + " ".join(parts) + ")" if parts else ""
        if kind == "chars":
            return _lark_chars(e[1], e[2])
        if kind == "ref":
            if e[1] not in names:
                raise GbnfSyntaxError("undefined rule " + e[1])
            return names[e[1]]
        if kind == "rep":
            inner, lo, hi = expr(e[1]), e[2], e[3]
            if not inner:
                return ""
            inner = "(" + inner + ")"
            if hi is None:
                fixed = "%s~%d " % (inner, lo) if lo > 0 else ""
                return "(" + fixed + inner + "*)"
            if hi == 0:
                return ""
            if lo == 0:
                return "[%s~1..%d]" % (inner, hi)
            return "%s~%d..%d" % (inner, lo, hi)
        raise AssertionError(kind)

    lines = ["start: " + names["root"]]
    for n, e in rules.items():
        alts = e[1]
        lines.append("%s: %s" % (names[n], " | ".join(expr(s) for s in alts)))
    return "\n".join(lines) + "\n"


class Recognizer:
    def __init__(self, gbnf_text):
        self.lark_text = to_lark(parse_gbnf(gbnf_text))
        self.parser = Lark(self.lark_text, parser="earley", lexer="dynamic")

    def label(self, text):
        try:
            self.parser.parse(text)
            return "accept"
        except UnexpectedEOF:
            return "prefix"
        except UnexpectedCharacters:
            return "reject"


if __name__ == "__main__":
    rec = Recognizer(open(sys.argv[1], encoding="utf-8").read())
    for t in sys.argv[2:]:
        print(rec.label(t), repr(t))
