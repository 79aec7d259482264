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
an inventory (pure functions, unit-tested in tests/unit/test_constraint.py).
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
    tokens = _TOKEN.findall(text)
    if "".join(tokens).replace(" ", "") != re.sub(r"\s+", "", text):
        raise UsageError(f"--requires {text!r}: cannot parse")
    if not tokens:
        raise UsageError("--requires: empty constraint")
    pos = 0

    def peek():
        return tokens[pos] if pos < len(tokens) else None

    def take():
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def expr_or(depth):
        terms = [expr_and(depth)]
        while peek() in ("or", "|", "||"):
            take()
            terms.append(expr_and(depth))
        return terms[0] if len(terms) == 1 else {"or": terms}

    def expr_and(depth):
        terms = [unary(depth)]
        while peek() is not None and peek() not in ("or", "|", "||", ")"):
            if peek() in ("and", "&", "&&"):
                take()
            terms.append(unary(depth))
        return terms[0] if len(terms) == 1 else {"and": terms}

    def unary(depth):
        if depth > MAX_DEPTH:
            raise UsageError(f"--requires {text!r}: nested too deeply")
        tok = peek()
        if tok is None:
            raise UsageError(f"--requires {text!r}: a term is missing at the end")
        if tok in ("not", "!"):
            take()
            return {"not": [unary(depth + 1)]}
        if tok == "(":
            take()
            inner = expr_or(depth + 1)
            if peek() != ")":
                raise UsageError(f"--requires {text!r}: missing ')'")
            take()
            return inner
        if tok in (")", "and", "&", "&&", "or", "|", "||"):
            raise UsageError(f"--requires {text!r}: unexpected {tok!r}")
        take()
        if tok.startswith("-"):
            return {"not": [_term(tok[1:], text)]}
        return _term(tok, text)

    out = expr_or(0)
    if pos != len(tokens):
        raise UsageError(f"--requires {text!r}: unexpected {tokens[pos]!r}")
    check(out)
    return out


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
        if op == "properties":
            for p in values:
                if p.startswith("^"):
                    out -= props.get(p[1:], set())
                else:
                    out &= props.get(p, set())
        elif op == "hostlist":
            names = set()
            for v in values:
                names.update(hostlist.decode(v))
            out &= {r for r in everyone if r < len(hosts) and hosts[r] in names}
        elif op == "ranks":
            ids = set()
            for v in values:
                ids |= idset.decode(v)
            out &= ids
        elif op == "and":
            for v in values:
                out &= ranks(v, everyone, props, hosts)
        elif op == "or":
            any_ = set()
            for v in values:
                any_ |= ranks(v, everyone, props, hosts)
            out &= any_
        elif op == "not":
            for v in values:
                out -= ranks(v, everyone, props, hosts)
    return out
