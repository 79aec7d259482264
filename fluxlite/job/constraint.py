"""Job constraints (RFC 31): which nodes a job may run on.

A constraint is JSON in `attributes.system.constraints`:

    {"properties": ["gpu", "^debug"]}        every property (^name: not having it)
    {"hostlist": ["node[0-1]"]}              any of these hosts
    {"ranks": ["0-1"]}                       any of these ranks
    {"and": [C, ...]}  {"or": [C, ...]}  {"not": [C]}

`parse()` turns `--requires` text into that JSON, as Flux's constraint
syntax: terms are `NAME` (a property), `host:HOSTLIST`, `rank:IDSET` or
`property:NAME`; `-TERM`, `not TERM` or `!TERM` negate; `and`/`&`/`&&`,
`or`/`|`/`||` and parentheses combine; terms side by side are and-ed.
`check()` validates a constraint at submit and `ranks()` evaluates one over
an inventory (pure functions, unit-tested in tests/unit/test_resources.py).
"""

from __future__ import annotations

import re

from ..errors import UsageError
from ..util import hostlist, idset

OPERATORS = ("properties", "hostlist", "ranks", "and", "or", "not")
_ALIASES = {"host": "hostlist", "hosts": "hostlist", "hostlist": "hostlist",
            "rank": "ranks", "ranks": "ranks", "property": "properties",
            "properties": "properties"}
_TOKEN = re.compile(r"\s*(\(|\)|&&|\|\||&|\||!|[^\s()&|!]+)")
MAX_DEPTH = 32
MAX_TERMS = 1024


def parse(text: str) -> dict:
    """--requires text as an RFC 31 constraint; UsageError says what is wrong."""
    parser = _Parser(text)
    if "".join(parser.tokens).replace(" ", "") != re.sub(r"\s+", "", text):
        raise UsageError(f"--requires {text!r}: cannot parse")
    if not parser.tokens:
        raise UsageError("--requires: empty constraint")
    out = parser.expr_or(0)
    if parser.peek() is not None:
        raise parser.error(f"unexpected {parser.peek()!r}")
    check(out)
    return out


_OR, _AND = ("or", "|", "||"), ("and", "&", "&&")


class _Parser:
    """Recursive descent over the tokens of --requires text: `or` binds loosest,
    then `and` (or terms side by side), then `not` and parentheses."""

    def __init__(self, text: str):
        self.text = text
        self.tokens = _TOKEN.findall(text)
        self.pos = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        self.pos += 1
        return self.tokens[self.pos - 1]

    def error(self, what: str) -> UsageError:
        return UsageError(f"--requires {self.text!r}: {what}")

    def expr_or(self, depth: int) -> dict:
        terms = [self.expr_and(depth)]
        while self.peek() in _OR:
            self.take()
            terms.append(self.expr_and(depth))
        return terms[0] if len(terms) == 1 else {"or": terms}

    def expr_and(self, depth: int) -> dict:
        terms = [self.unary(depth)]
        while self.peek() is not None and self.peek() not in (*_OR, ")"):
            if self.peek() in _AND:
                self.take()
            terms.append(self.unary(depth))
        return terms[0] if len(terms) == 1 else {"and": terms}

    def unary(self, depth: int) -> dict:
        if depth > MAX_DEPTH:
            raise self.error("nested too deeply")
        tok = self.peek()
        if tok is None:
            raise self.error("a term is missing at the end")
        if tok in ("not", "!"):
            self.take()
            return {"not": [self.unary(depth + 1)]}
        if tok == "(":
            self.take()
            inner = self.expr_or(depth + 1)
            if self.peek() != ")":
                raise self.error("missing ')'")
            self.take()
            return inner
        if tok in (")", *_AND, *_OR):
            raise self.error(f"unexpected {tok!r}")
        self.take()
        if tok.startswith("-"):
            return {"not": [_term(tok[1:], self.text)]}
        return _term(tok, self.text)


def _term(tok: str, text: str) -> dict:
    op, sep, value = tok.partition(":")
    if not sep:
        op, value = "properties", tok
    name = _ALIASES.get(op)
    if name is None:
        raise UsageError(f"--requires {text!r}: unknown operator {op!r} (allowed: host, "
                         "rank, property, or a property name)")
    if not value:
        raise UsageError(f"--requires {text!r}: {op}: needs a value")
    return {name: [value]}


def combine(constraints: list[dict]) -> dict | None:
    """Several constraints (repeated --requires, a queue's requires): all must hold."""
    constraints = [c for c in constraints if c]
    if not constraints:
        return None
    return constraints[0] if len(constraints) == 1 else {"and": constraints}


def check(c, where: str = "constraint", depth: int = 0, count: list | None = None) -> None:
    """UsageError unless `c` is an RFC 31 constraint fluxlite evaluates."""
    count = [0] if count is None else count
    count[0] += 1
    if depth > MAX_DEPTH or count[0] > MAX_TERMS:
        raise UsageError(f"{where}: too deep or too large (at most {MAX_DEPTH} levels, "
                         f"{MAX_TERMS} terms)")
    if not isinstance(c, dict):
        raise UsageError(f"{where}: expected an object, got {c!r}")
    for op, values in c.items():
        if op not in OPERATORS:
            raise UsageError(f"{where}: unknown operator {op!r} (allowed: "
                             f"{', '.join(OPERATORS)})")
        if not isinstance(values, list):
            raise UsageError(f"{where}.{op}: expected an array")
        if op in ("and", "or", "not"):
            for i, v in enumerate(values):
                check(v, f"{where}.{op}[{i}]", depth + 1, count)
            continue
        for v in values:
            if not isinstance(v, str) or not v:
                raise UsageError(f"{where}.{op}: expected strings, got {v!r}")
            try:
                if op == "hostlist":
                    hostlist.decode(v)
                elif op == "ranks":
                    idset.decode(v)
            except ValueError as exc:
                raise UsageError(f"{where}.{op}: {exc}") from None


def ranks(c: dict | None, everyone: set[int], props: dict[str, set[int]],
          hosts) -> set[int]:
    """The ranks of `everyone` that satisfy constraint `c` (None: all of them)."""
    if c is None:
        return set(everyone)
    out = set(everyone)
    for op, values in c.items():
        if op in ("and", "or", "not"):
            each = [ranks(v, everyone, props, hosts) for v in values]
            if op == "and":
                for allowed in each:
                    out &= allowed
            elif op == "or":
                out &= set().union(*each)
            else:
                out -= set().union(*each)
        else:
            out = _term_ranks(op, values, out, everyone, props, hosts)
    return out


def _term_ranks(op: str, values: list, out: set[int], everyone: set[int],
                props: dict[str, set[int]], hosts) -> set[int]:
    """`out` narrowed by one term (properties, hostlist or ranks)."""
    if op == "properties":
        for p in values:
            if p.startswith("^"):
                out = out - props.get(p[1:], set())
            else:
                out = out & props.get(p, set())
    elif op == "hostlist":
        names = {name for v in values for name in hostlist.decode(v)}
        out = out & {r for r in everyone if r < len(hosts) and hosts[r] in names}
    elif op == "ranks":
        out = out & set().union(*(idset.decode(v) for v in values))
    return out
