"""`fluxlite module`: Flux's flux-module(1) over this broker's built-in modules.

    list     the modules (services) a broker runs
    remove   stop one: its requests then fail ENOSYS (`remove sched` pauses
             scheduling: pending jobs wait; `load sched` resumes it)
    load     start a removed one again (a compiled Flux module cannot be loaded)
    reload   remove, then load
    stats    its message counters as JSON (NAME.stats-get), or getrusage (-R)
    debug    read or change its debug flags (NAME.debug)
    trace    print each message to or from the named modules as it passes

Each talks to the local broker (or `-r RANK`) through `module.*` and the
per-module methods (service/module.py, service/modstats.py); errors are Flux's
words ("No such file or directory", "Device or resource busy", "File exists").
"""

from __future__ import annotations

import errno
import json
import sys
import time

import click

from ..errors import NoService, NotFound, UsageError
from .common import HELP, NO_INTERSPERSED, RANK, handle

TYPE_CHARS = {1: ">", 2: "<", 4: "e", 8: "c"}
TYPE_NAMES = {"request": 1, "response": 2, "event": 4, "control": 8}
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


class _OptionalValues(click.Command):
    """Options whose value is optional and, as with Flux's parser, only ever attached
    (`-Rchildren`, `--rusage=self`): a bare `-R` takes its default and leaves the
    next word alone (`stats -R kvs` means kvs)."""

    optional: dict[str, tuple[str, str]] = {}   # short -> (long, value when bare)

    def parse_args(self, ctx, args):
        out = []
        for i, a in enumerate(args):
            if a == "--":
                out += args[i:]
                break
            for short, (long_, bare) in self.optional.items():
                if a in (short, long_):
                    a = f"{long_}={bare}"
                elif a.startswith(short) and len(a) > 2 and not a.startswith("--"):
                    a = f"{long_}={a[2:]}"
            out.append(a)
        return super().parse_args(ctx, out)


def _optional(**table):
    return type("OptionalValues", (_OptionalValues,), {"optional": table})


def _rank_option(fn):
    return click.option("-r", "--rank", type=RANK, default=None,
                        help="Ask this rank's broker (default: the local one).")(fn)


@click.group(context_settings=HELP)
def module():
    """Manage each broker's modules: list, remove, load, reload, stats, debug, trace."""


@module.command("list", context_settings=HELP)
@click.option("-l", "--long", "long_", is_flag=True, help="Add the module's path.")
@_rank_option
def module_list(long_, rank):
    """List the modules of a broker as flux module list: NAME, IDLE (seconds since
    it last handled a request), S (R: running), queue depths, SERVICE."""
    with handle() as h:
        mods = h.call("module.list", nodeid=rank)["mods"]
    if long_:
        click.echo(f"{'Module':<24.24} {'Idle':>4}  S Sendq Recvq {'Service':<8} Path")
    else:
        click.echo(f"{'Module':<24} {'Idle':>4}  S Sendq Recvq Service")
    for m in mods:
        idle = str(m["idle"]) if m["idle"] <= 99 else "idle"
        services = ",".join(s for s in m["services"] if s != m["name"])
        if long_:
            if len(services) > 8:
                services = services[:7] + "+"
            line = (f"{m['name']:<24.24} {idle:>4}  R {m['sendqueue']:>5} "
                    f"{m['recvqueue']:>5} {services:<8} {m['path']}")
        else:
            line = (f"{m['name']:<24.24} {idle:>4}  R {m['sendqueue']:>5} "
                    f"{m['recvqueue']:>5} {services}")
        click.echo(line.rstrip())


# ------------------------------------------------------------ remove, load
def _remove(h, name: str, force: bool, cancel: bool, rank) -> None:
    try:
        h.call("module.remove", {"name": name, "cancel": cancel}, nodeid=rank)
    except NotFound:
        if not force:
            raise


def _load(h, name: str, args, as_name, rank) -> None:
    payload = {"path": name, "args": list(args)}
    if as_name:
        payload["name"] = as_name
    got = h.call("module.load", payload, nodeid=rank) or {}
    if got.get("ignored"):
        print(f"fluxlite module load: {as_name or name}: arguments ignored (this "
              f"built-in module reads none): {' '.join(got['ignored'])}", file=sys.stderr)


_force = click.option("-f", "--force", is_flag=True, help="Ignore a module that is not "
                                                           "loaded.")
_cancel = click.option("--cancel", is_flag=True, help="Accepted for Flux scripts (a "
                                                       "built-in module has no thread to "
                                                       "cancel).")
_name = click.option("-n", "--name", "as_name", default=None, metavar="NAME",
                     help="The module's name (a built-in module has only its own).")


def _process(fn):
    """Flux's --exec and --loader=PATH (a module as a process of its own): accepted;
    fluxlite's built-in modules run in the broker, and a module path is refused."""
    fn = click.option("--exec", "as_process", is_flag=True,
                      help="Accepted (fluxlite's built-in modules run in the broker).")(fn)
    return click.option("--loader", metavar="PATH", default=None,
                        help="Accepted with a module path, which fluxlite refuses (it "
                             "loads no compiled module).")(fn)


@module.command("remove", context_settings=HELP)
@_force
@_cancel
@_rank_option
@click.argument("name")
def module_remove(force, cancel, rank, name):
    """Stop the module NAME: requests to its services then fail (ENOSYS) until it is
    loaded again.  Modules that hold the instance's state (kvs, job-manager, ...)
    refuse (Device or resource busy)."""
    with handle() as h:
        _remove(h, name, force, cancel, rank)


module.add_command(click.Command("unload", callback=module_remove.callback,
                                 params=module_remove.params, hidden=True,
                                 context_settings=HELP, help=module_remove.help))


@module.command("load", context_settings=NO_INTERSPERSED)
@_name
@_process
@_rank_option
@click.argument("name")
@click.argument("args", nargs=-1)
def module_load(as_name, as_process, loader, rank, name, args):
    """Start the built-in module NAME again after `module remove` (sched-simple is
    fluxlite's sched).  A path to a compiled module cannot be loaded."""
    del as_process, loader
    with handle() as h:
        _load(h, name, args, as_name, rank)


@module.command("reload", context_settings=NO_INTERSPERSED)
@_force
@_name
@_process
@_cancel
@_rank_option
@click.argument("name")
@click.argument("args", nargs=-1)
def module_reload(force, as_name, as_process, loader, cancel, rank, name, args):
    """Remove the module NAME, then load it again."""
    del as_process, loader
    with handle() as h:
        _remove(h, as_name or name, force, cancel, rank)
        _load(h, name, args, as_name, rank)


# ------------------------------------------------------------ stats, debug
@module.command("stats", context_settings=HELP, cls=_optional(**{"-R": ("--rusage",
                                                                         "self")}))
@click.option("-p", "--parse", "objname", default=None, metavar="OBJNAME",
              help="Print only this member (a period-delimited path).")
@click.option("-s", "--scale", type=float, default=1.0, metavar="N",
              help="Scale a numeric value by N.")
@click.option("-t", "--type", "typ", type=click.Choice(("int", "double")), default=None,
              help="Print the value as this type.")
@click.option("-R", "--rusage", default=None, metavar="[WHO]",
              type=click.Choice(("self", "children", "thread")),
              help="getrusage(2) of the broker instead (default: self).")
@click.option("-c", "--clear", is_flag=True, help="Clear the counters (this rank).")
@click.option("-C", "--clear-all", is_flag=True, help="Clear the counters on every rank.")
@_rank_option
@click.argument("name")
def module_stats(objname, scale, typ, rusage, clear, clear_all, rank, name):
    """Print the module NAME's message counters as JSON (Flux's
    "#request (tx)"... keys, and the module's own where it has some)."""
    with handle() as h:
        if clear:
            h.call(f"{name}.stats-clear", nodeid=rank)
            return
        if clear_all:
            size = int(h.getattr("size"))
            for r in range(size):
                try:
                    h.call(f"{name}.stats-clear", nodeid=r)
                except NoService:   # not loaded on that rank
                    pass
            return
        if rusage:
            got = h.call(f"{name}.rusage", {"who": rusage}, nodeid=rank)
        else:
            got = h.call(f"{name}.stats-get", nodeid=rank)
    click.echo(_stats_text(got, objname, scale, typ))


def _stats_text(obj, objname, scale: float, typ) -> str:
    if objname:
        for part in objname.split("."):
            if not isinstance(obj, dict) or part not in obj:
                raise NotFound(f"`{objname}' not found in response")
            obj = obj[part]
    number = isinstance(obj, (int, float)) and not isinstance(obj, bool)
    if typ == "int" or (typ is None and isinstance(obj, int) and not isinstance(obj, bool)):
        return str(int((obj if number else 0) * scale))
    if typ == "double" or (typ is None and isinstance(obj, float)):
        return f"{(obj if number else 0) * scale:f}"
    return json.dumps(obj, indent=1)


def _flags(text: str) -> int:
    try:
        flags = int(text, 0)
    except ValueError:
        flags = -1
    if not 0 <= flags < 2 ** 64:
        raise UsageError(f"invalid flags {text!r}: a number from 0 to 2**64-1 (0x10, 16 "
                         "or 020)")
    return flags


@module.command("debug", context_settings=HELP)
@click.option("-C", "--clear", is_flag=True, help="Set the debug flags to 0.")
@click.option("-S", "--set", "set_", default=None, metavar="MASK", help="Set them to MASK.")
@click.option("-s", "--setbit", default=None, metavar="BIT", help="Set these bits.")
@click.option("-c", "--clearbit", default=None, metavar="BIT", help="Clear these bits.")
@_rank_option
@click.argument("name")
def module_debug(clear, set_, setbit, clearbit, rank, name):
    """Print the module NAME's debug flags (0x...), after changing them if asked."""
    op, flags = "setbit", 0
    if clear:
        op = "clr"
    elif set_ is not None:
        op, flags = "set", _flags(set_)
    elif clearbit is not None:
        op, flags = "clrbit", _flags(clearbit)
    elif setbit is not None:
        op, flags = "setbit", _flags(setbit)
    with handle() as h:
        got = h.call(f"{name}.debug", {"op": op, "flags": flags}, nodeid=rank)
    click.echo(f"0x{got['flags']:x}")


# -------------------------------------------------------------------- trace
@module.command("trace", context_settings=HELP, cls=_optional(**{"-L": ("--color",
                                                                         "always")}))
@click.option("-f", "--full", is_flag=True, help="Show each message's JSON payload.")
@click.option("-T", "--topic", "glob", default="*", metavar="GLOB",
              help="Only messages whose topic matches GLOB.")
@click.option("-t", "--type", "types", multiple=True, metavar="TYPE,...",
              help="Only these types: request, response, event, control.")
@click.option("-L", "--color", default="auto", metavar="[WHEN]",
              type=click.Choice(("always", "never", "auto")),
              help="Colorize: always (bare -L), never, or auto (the default).")
@click.option("-H", "--human", is_flag=True, help="Human-readable timestamps.")
@click.option("-d", "--delta", is_flag=True, help="With --human, time since the last "
                                                   "message.")
@_rank_option
@click.argument("names", nargs=-1, required=True)
def module_trace(full, glob, types, color, human, delta, rank, names):
    """Print each message to (rx) or from (tx) the modules NAMES as it passes, one
    line each (TIME NAME rx|tx TYPE TOPIC [SIZE] and, for a response, its result),
    until interrupted."""
    if delta and not human:
        raise UsageError("--delta can only be used with --human")
    mask = 0
    for t in (w for arg in types for w in arg.split(",") if w):
        if t not in TYPE_NAMES:
            raise UsageError("valid types: request, response, event, control")
        mask |= TYPE_NAMES[t]
    width = max(len(n) for n in names)
    paint = color == "always" or (color == "auto" and sys.stdout.isatty())
    clock = _Clock(human, delta)
    try:
        with handle() as h:
            for rec in h.stream("module.trace", {"names": list(names), "typemask": mask,
                                                 "topic_glob": glob, "full": full},
                                nodeid=rank):
                _print_record(rec, width, clock, paint)
    except KeyboardInterrupt:
        return 0
    return 0


def _print_record(rec: dict, width: int, clock, paint: bool) -> None:
    typ = rec.get("type", 0)
    line = (f"{rec.get('name', ''):>{width}} {rec.get('prefix', '')} "
            f"{TYPE_CHARS.get(typ, '?')} {rec.get('topic', '')} "
            f"[{_size(rec.get('payload_size', 0))}]")
    errnum = rec.get("errnum", 0)
    if typ == 2:
        line += " success" if not errnum else f" {errno.errorcode.get(errnum, errnum)}"
    extra = None
    if errnum and rec.get("errstr"):
        extra = rec["errstr"]
    elif "payload" in rec:
        extra = json.dumps(rec["payload"], indent=2)
    text = line + ("\n" + extra if extra else "")
    if paint:
        code = "\033[1;31m" if typ == 2 and errnum else {1: "\033[1;34m", 2: "\033[36m",
                                                          4: "\033[33m"}.get(typ, "\033[1m")
        text = f"{code}{text}\033[0m"
    sys.stdout.write(f"{clock.stamp(rec.get('timestamp', time.time()))} {text}\n")
    sys.stdout.flush()


def _size(n: float) -> str:
    """A payload's size as Flux's trace shows it: 512, 1.5K, 3M."""
    if n < 1024:
        return str(int(n))
    for unit in ("K", "M", "G"):
        n /= 1024
        if n < 1024 or unit == "G":
            return f"{n:.1f}".removesuffix(".0") + unit
    return str(n)


class _Clock:
    """Flux's trace timestamps: ISO 8601 with milliseconds, or with --human the
    minute once ([Mon DD HH:MM]) and seconds within it ([+SS.ffffff]; -d: since the
    last message)."""

    def __init__(self, human: bool, delta: bool):
        self.human, self.delta = human, delta
        self.minute_start = None
        self.last = None

    def stamp(self, t: float) -> str:
        lt = time.localtime(t)
        if not self.human:
            return time.strftime("%Y-%m-%dT%H:%M:%S", lt) + f".{int((t % 1) * 1000):03d}"
        if self.minute_start is None or int(t // 60) != int(self.minute_start // 60):
            self.minute_start = self.last = t
            return f"[{MONTHS[lt.tm_mon - 1]}{lt.tm_mday:02d} {lt.tm_hour:02d}:{lt.tm_min:02d}]"
        offset = t - self.last if self.delta else t - self.minute_start + \
            (self.minute_start % 60)
        self.last = t
        return f"[{offset:+11.6f}]"
