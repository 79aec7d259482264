"""`flux.constraint.parser`: a query such as `a&(b|-host:foo)` into an RFC 31
constraint object ({"and": [{"t": ["a"]}, {"or": [...]}]}).

Terms are `op:value` or a bare value (given the operator_map's None entry);
values may be quoted ('a quoted string').  `-term` and `not x` negate; terms
side by side, `&`, `&&` and `and` join with and; `|`, `||` and `or` with or
(and binds tighter); parentheses group.  A subclass sets `operator_map`
(operator names to the constraint's keys; None: the operator of a bare value),
`split_values` (an operator whose values are split on a separator) and
`combined_terms` (operators whose like terms under one `and` merge into one)."""

from __future__ import annotations

import re

__all__ = ["ConstraintParser", "ConstraintSyntaxError"]


class ConstraintSyntaxError(Exception):
    """A query that is not valid in the constraint language."""


_OPERATOR = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_SPECIAL = set("()|&'\"")


class _Tokens:
    """Words, quoted strings and punctuation of a query, read one at a time."""

    def __init__(self, text: str):
        self.items: list[tuple[str, str]] = []   # (kind, text): op, word, term
        i, n = 0, len(text)
        while i < n:
            c = text[i]
            if c.isspace():
                i += 1
            elif c in "()":
                self.items.append((c, c))
                i += 1
            elif c in "|&":
                j = i + 2 if text[i:i + 2] in ("||", "&&") else i + 1
                self.items.append(("or" if c == "|" else "and", text[i:j]))
                i = j
            else:
                i = self._term(text, i)
        self.pos = 0

    def _term(self, text: str, i: int) -> int:
        """A term: [-][op:]value, the value a word or a quoted string."""
        start, out = i, []
        while i < len(text) and not text[i].isspace() and text[i] not in "()|&":
            c = text[i]
            if c in "'\"":
                end = text.find(c, i + 1)
                if end < 0:
                    raise ConstraintSyntaxError(f"unterminated quote in {text[start:]!r}")
                out.append(("q", text[i + 1:end]))
                i = end + 1
            else:
                out.append(("c", c))
                i += 1
        raw = "".join(v for _, v in out)
        plain = "".join(v if k == "c" else "\0" for k, v in out)
        if plain in ("and", "or", "not"):
            self.items.append((plain, plain))
        else:
            self.items.append(("term", raw + "\0" + plain))
        return i

    def peek(self):
        return self.items[self.pos] if self.pos < len(self.items) else (None, None)

    def take(self):
        item = self.peek()
        self.pos += 1
        return item


class ConstraintParser:
    operator_map: dict = {}
    split_values: dict = {}
    combined_terms: set = set()

    def parse(self, query: str) -> dict:
        tokens = _Tokens(query)
        if tokens.peek()[0] is None:
            raise ConstraintSyntaxError("empty constraint")
        result = self._or(tokens)
        if tokens.peek()[0] is not None:
            raise ConstraintSyntaxError(f"unexpected {tokens.peek()[1]!r} in {query!r}")
        return result

    # -- grammar ------------------------------------------------------------------
    def _or(self, tokens) -> dict:
        parts = [self._and(tokens)]
        while tokens.peek()[0] == "or":
            tokens.take()
            parts.append(self._and(tokens))
        return parts[0] if len(parts) == 1 else {"or": parts}

    def _and(self, tokens) -> dict:
        parts = [self._unary(tokens)]
        while tokens.peek()[0] in ("and", "term", "not", "("):
            if tokens.take()[0] != "and":
                tokens.pos -= 1
            parts.append(self._unary(tokens))
        if len(parts) == 1:
            return parts[0]
        return self._combine(parts)

    def _unary(self, tokens) -> dict:
        kind, text = tokens.take()
        if kind == "not":
            return {"not": [self._unary(tokens)]}
        if kind == "(":
            inner = self._or(tokens)
            if tokens.take()[0] != ")":
                raise ConstraintSyntaxError("missing ')'")
            return inner
        if kind == "term":
            return self._term(text)
        raise ConstraintSyntaxError(f"unexpected {text!r}" if text else "unexpected end")

    def _term(self, text: str) -> dict:
        raw, plain = text.split("\0", 1)
        negate = plain.startswith("-")
        if negate:
            raw, plain = raw[1:], plain[1:]
        colon = plain.find(":")
        if colon >= 0:
            op, value = plain[:colon], raw[colon + 1:]
            if not _OPERATOR.match(op):
                raise ConstraintSyntaxError(f"invalid operator {op!r}")
            if not value:
                raise ConstraintSyntaxError(f"operator {op!r} has no value")
            key = self.operator_map.get(op, op)
        else:
            if None not in self.operator_map:
                raise ConstraintSyntaxError(f"{raw!r}: a term needs an operator "
                                            "(op:value)")
            key, value = self.operator_map[None], raw
            if not value:
                raise ConstraintSyntaxError("empty term")
        sep = self.split_values.get(key)
        values = [v for v in value.split(sep)] if sep else [value]
        term = {key: values}
        return {"not": [term]} if negate else term

    def _combine(self, parts: list[dict]) -> dict:
        """An and of parts: nested ands flattened, like terms of combined_terms merged."""
        flat: list[dict] = []
        for p in parts:
            flat.extend(p["and"] if list(p) == ["and"] else [p])
        merged: list[dict] = []
        for p in flat:
            (key, values), = p.items()
            if key in self.combined_terms:
                same = next((m for m in merged if list(m) == [key]), None)
                if same is not None:
                    same[key] = same[key] + values
                    continue
            merged.append(dict(p))
        return merged[0] if len(merged) == 1 else {"and": merged}
