"""`fluxlite bulksubmit`: one job per input, as flux-bulksubmit(1).

The command and every option are templates filled in with Python's str.format()
from each combination of inputs: `{}` or `{N}` is an input, `{seq}` and `{seq1}` its
sequence number, `{.%}`, `{./}`, `{./%}`, `{.//}` (or `{N.%}`...) the input without
extension, its basename, both, its dirname, and `{.NAME}` an attribute given with
--define (`{.%}` is `{0.%}`).  `{cc}` is filled in a second pass, by submit's --cc.
An option that click would check or convert (`-n {.p2}`, `-t {}m`) is kept as
written when it holds a template, and checked once per input after filling in.
"""

from __future__ import annotations

import copy
import itertools
import os
import random
import string
import sys

import click

from ..errors import UsageError
from .common import NO_INTERSPERSED
from .options import COMMON, IO, TASKS, apply, jobspec_from
from .submit import (
    CC_OPTIONS,
    SUBMIT,
    cc_or_bcc,
    open_logs,
    refuse_per_task_input,
    service_stdin,
    submit_all,
    with_cc,
)

SEPARATORS = (":::", ":::+", "::::", "::::+")

BUILTIN = {
    "%": lambda x: os.path.splitext(x)[0],
    "/": os.path.basename,
    "/%": lambda x: os.path.splitext(os.path.basename(x))[0],
    "//": os.path.dirname,
}


class _Formatter(string.Formatter):
    def __init__(self, defines: dict[str, str]):
        self.defines = defines

    def get_field(self, field_name, args, kwargs):
        import _string
        first, rest = _string.formatter_field_name_split(field_name)
        if first == "":  # {.%}: of the (first) input
            first = 0
        obj = self.get_value(first, args, kwargs)
        for is_attr, key in rest:
            if not is_attr:
                raise UsageError(f"unknown field '{field_name}'")
            obj = self.attribute(str(obj), key, field_name)
        return obj, first

    def get_value(self, key, args, kwargs):
        if isinstance(key, int):
            if key >= len(args):
                raise UsageError(f"unknown field '{{{key}}}': {len(args)} input list(s), "
                                 "numbered from 0")
            return args[key]
        if key not in kwargs:
            raise UsageError(f"unknown field '{{{key}}}'")
        return kwargs[key]

    def attribute(self, value: str, name: str, field_name: str) -> str:
        if name in self.defines:
            try:
                return eval(self.defines[name], {}, {"x": value})  # noqa: S307 (user's own code)
            except Exception as exc:
                raise UsageError(f"--define {name}: {exc}") from None
        if name in BUILTIN:
            return BUILTIN[name](value)
        raise UsageError(f"unknown field '{field_name}'")


class _Deferred:
    """An option value holding a template: checked and converted per input."""
    __slots__ = ("option", "raw")

    def __init__(self, option: click.Option, raw):
        self.option = option
        self.raw = raw      # a string, or a tuple of them for a repeatable option

    def resolve(self, ctx: click.Context, sub, shown: list[str]):
        """The value for one input (`sub` fills a template in); the option as filled in
        is added to `shown` (what --dry-run prints)."""
        several = isinstance(self.raw, (tuple, list))
        raws = list(self.raw) if several else [self.raw]
        filled = [sub(v) for v in raws]
        name = max(self.option.opts, key=len)
        shown.extend(f"{name}={v}" for v in filled)
        try:
            return click.Option.process_value(self.option, ctx,
                                              tuple(filled) if several else filled[0])
        except click.BadParameter as exc:
            given = " ".join(f"{name}={v}" for v in filled)
            raise UsageError(f"{given} (from {' '.join(raws)}): {exc.message}") from None


def _holds_template(value) -> bool:
    values = value if isinstance(value, (tuple, list)) else (value,)
    return any(isinstance(v, str) and "{" in v for v in values)


class _TemplatedOption(click.Option):
    """A job option whose value may be a template: left as written until filled in."""

    def process_value(self, ctx, value):
        if _holds_template(value):
            return _Deferred(self, value)
        return super().process_value(ctx, value)


def templated(options: list[click.Option]) -> list[click.Option]:
    """Copies of `options` that defer checking a value holding a template (those
    that convert their value or have a callback; plain text is filled in directly)."""
    out = []
    for opt in options:
        if opt.type is not click.STRING or opt.callback is not None:
            opt = copy.copy(opt)
            opt.__class__ = _TemplatedOption
        out.append(opt)
    return out


def _parse_defines(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for v in values:
        name, sep, code = v.partition("=")
        if not sep or not name.isidentifier() or not code:
            raise UsageError(f"--define {v!r}: expected NAME=CODE")
        try:
            compile(code, "--define", "eval")
        except SyntaxError as exc:
            raise UsageError(f"--define {name}: {exc.msg}") from None
        out[name] = code
    return out


def split_inputs(args: list[str], sep: str | None = "\n"
                 ) -> tuple[list[str], list[tuple[list[str], bool]]]:
    """The command template and the input lists, each with whether it is linked
    (::: WORDS..., :::: FILE whose items, split on `sep`, are the inputs, - for stdin)."""
    command: list[str] = []
    lists: list[tuple[list[str], bool]] = []
    files: list[str] | None = None
    for a in args:
        if a in SEPARATORS:
            if files:
                lists[-1][0].extend(read_inputs(files[0], sep))
            files = [] if a.startswith("::::") else None
            lists.append(([], a.endswith("+")))
        elif not lists:
            command.append(a)
        elif files is not None:
            if files:
                raise UsageError(f"Multiple args not allowed after ::::: give one file (or "
                                 f"- for stdin) per ::::, not {files[0]!r} and {a!r}")
            files.append(a)
        else:
            lists[-1][0].append(a)
    if files:
        lists[-1][0].extend(read_inputs(files[0], sep))
    return command, lists


def read_inputs(path: str, sep: str | None = "\n") -> list[str]:
    """The non-empty items of a file (- is stdin) split on `sep` (None: whitespace)."""
    if path == "-":
        return [x for x in sys.stdin.read().split(sep) if x]
    try:
        with open(path) as f:
            return [x for x in f.read().split(sep) if x]
    except OSError as exc:
        raise UsageError.from_oserror(exc, path) from None


def _separator(value: str) -> str | None:
    """--sep as Flux's: escape sequences expand (\\t), `none` splits on whitespace."""
    if value.lower() == "none":
        return None
    try:
        sep = value.encode().decode("unicode_escape")
    except UnicodeDecodeError as exc:
        raise UsageError(f"--sep {value!r}: {exc.reason}") from None
    if not sep:
        raise UsageError("--sep: empty: give a separator, or none to split on whitespace")
    return sep


def combinations(lists: list[tuple[list[str], bool]]) -> list[list[str]]:
    """Cross product of the lists (the last varies fastest, as Flux); a linked list
    gives one item per combination, cycled when it is shorter."""
    if not lists:
        return []
    combined = [i for i, (_, linked) in enumerate(lists) if not linked or i == 0]
    out = []
    for k, combo in enumerate(itertools.product(*(lists[i][0] for i in combined))):
        picked = dict(zip(combined, combo))
        row = []
        for i, (items, _) in enumerate(lists):
            if i in picked:
                row.append(picked[i])
            elif not items:
                return []
            else:
                row.append(items[k % len(items)])
        out.append(row)
    return out


@click.command(context_settings=NO_INTERSPERSED)
@apply(templated(TASKS + COMMON + IO + SUBMIT))
@click.option("--define", "defines", multiple=True, metavar="NAME=CODE",
              help="Define {.NAME}: the Python expression CODE of the input x.")
@click.option("--dry-run", is_flag=True, help="Print the commands, submit nothing.")
@click.option("-v", "--verbose", is_flag=True,
              help="Print each command (as --dry-run) as it is submitted.")
@click.option("--shuffle", is_flag=True, help="Submit the commands in random order.")
@click.option("--sep", default="\n", metavar="STRING",
              help="Separator of the inputs read from stdin or a :::: file (default: "
                   "newline; none: whitespace).")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def bulksubmit(args, cc, quiet, wait, watch, progress, defines, dry_run, verbose, shuffle,
               sep, **params):
    """Submit one job per input: COMMAND [::: INPUTS...]... (lines of stdin without :::).

    {} or {N} in COMMAND and in any option (-n {}, --output={}.out) is the input;
    several ::: lists give their cross product.
    """
    ctx = click.get_current_context()
    open_logs(params)
    cc, bcc = cc_or_bcc(cc, params)
    fmt = _Formatter(_parse_defines(defines))
    command, rows = _inputs(list(args), _separator(sep))
    plain = {p.name: max(p.opts, key=len) for p in ctx.command.params
             if isinstance(p, click.Option) and p.name in params}
    order = list(enumerate(rows))
    if shuffle:  # each keeps its {seq}, as Flux
        random.shuffle(order)
    jobs = []
    for seq, row in order:
        sub = _substituter(fmt, row, seq)
        argv, p, shown = _one_job(ctx, command, params, plain, sub)
        this_cc = sub(cc)
        if this_cc is None:  # no --cc: {cc} is empty, as Flux
            argv, p = _without_cc(argv, p)
        jobs.extend((argv, p, shown) for argv, p in with_cc(argv, p, this_cc,
                                                           set_env=not bcc))
    if dry_run or verbose:
        for argv, _, shown in jobs:
            click.echo("bulksubmit: submit " + " ".join(shown + argv))
    if dry_run:
        sys.exit(0)
    for _, p, _ in jobs:
        refuse_per_task_input(p)
    specs = [jobspec_from(argv, p, extra_options=service_stdin(p)) for argv, p, _ in jobs]
    sys.exit(submit_all(specs, params, urgencies=[p["urgency"] for _, p, _ in jobs],
                        quiet=quiet, wait=wait, watch=watch,
                        progress=progress, prog="fluxlite bulksubmit"))


def _inputs(args: list[str], sep) -> tuple[list[str], list]:
    """COMMAND (default {}) and the rows of inputs: the ::: lists' cross product, or
    stdin's inputs without one."""
    command, lists = split_inputs(args, sep)
    if not lists:
        lists = [(read_inputs("-", sep), False)]
    rows = combinations(lists)
    if not rows:
        raise UsageError("no inputs: give them after ::: or as lines on stdin")
    return command or ["{}"], rows


def _substituter(fmt, row, seq: int):
    """The function filling one input row's values into a template string."""
    def sub(text):
        if not isinstance(text, str):
            return text
        try:
            return fmt.format(text, *row, seq=seq, seq1=seq + 1, cc="{cc}")
        except UsageError as exc:
            raise UsageError(f"{text!r}: {exc.message}") from None
        except ValueError as exc:
            raise UsageError(f"{text!r}: {exc}") from None
    return sub


def _one_job(ctx, command: list[str], params: dict, plain: dict, sub):
    """One job's command and options with its input filled in, and the options that
    held a template as --dry-run shows them."""
    shown: list[str] = []
    p = {}
    for k, v in params.items():
        if isinstance(v, _Deferred):
            p[k] = v.resolve(ctx, sub, shown)
        elif _holds_template(v):  # plain text (--job-name, --env...): filled in
            p[k] = tuple(sub(x) for x in v) if isinstance(v, tuple) else sub(v)
            shown.extend(f"{plain[k]}={x}" for x in
                         (p[k] if isinstance(p[k], tuple) else (p[k],)))
        else:
            p[k] = v
    return [sub(a) for a in command], p, shown


def _without_cc(argv: list[str], p: dict) -> tuple[list[str], dict]:
    argv = [a.replace("{cc}", "") for a in argv]
    p = {k: (v.replace("{cc}", "") if k in CC_OPTIONS and isinstance(v, str) else v)
         for k, v in p.items()}
    p["env_rules"] = tuple(r.replace("{cc}", "") for r in p["env_rules"])
    return argv, p
