"""`fluxlite resource list | status | drain | undrain`, printed as Flux prints them.

`list` is the scheduler's view (`sched.resource-status`): how many nodes and
cores are free, allocated or down; a partly allocated node counts in both
the free and the allocated rows, as in Flux.  `status` is the resource
service's view of each rank (`resource.status`): avail, exclude, torpid, draining (a
drained rank where a job still runs, from the scheduler), drained,
offline or lost, with an UP mark (online or not).  `drain` and `undrain`
take an idset of ranks (re-draining needs --force or --update, as in Flux);
`drain` without arguments lists the draining and drained ranks.
NODELIST names each rank's host (the `hostlist` attribute).
"""

from __future__ import annotations

import json

import click

from ..jobapi import api
from ..protocol import kvs
from ..util import hostlist, idset
from ..util.fluid import utf8_locale
from .common import HELP, fsd_timeout, handle
from .eventprint import color_when, match_pairs
from .outformat import OutputFormat

LIST_STATES = ("up", "down", "allocated", "free", "all")
LIST_FORMATS = {"default": "{state:>10} {nnodes:>6} {ncores:>6} {ngpus:>5} {nodelist}"}
# the default, as Flux's, when queues are configured or some node has properties
LIST_DEFAULT_QUEUES = ("{state:>10} {queue:<8.8} {propertiesx:<10.10+} {nnodes:>6} "
                       "{ncores:>6} {ngpus:>5} {nodelist}")
LIST_DEFAULT_PROPERTIES = ("{state:>10} {propertiesx:<10.10+} {nnodes:>6} {ncores:>6} "
                           "{ngpus:>5} {nodelist}")
LIST_HEADINGS = {"state": "STATE", "nnodes": "NNODES", "ncores": "NCORES", "ngpus": "NGPUS",
                 "nodelist": "NODELIST", "ranks": "RANKS", "queue": "QUEUE",
                 "properties": "PROPERTIES", "propertiesx": "PROPERTIES"}

# as Flux's: a drained rank that still runs a job is "draining"
STATUS_STATES = ("avail", "exclude", "torpid", "draining", "drained", "offline", "lost")
DRAIN_STATES = ("draining", "drained")
STATUS_FORMATS = {"default": "{state:>10} {up:>2} {nnodes:>6} {nodelist}",
                  "long": "{state:>10} {up:>2} {nnodes:>6} {reason:<30.30+} {nodelist}"}
DRAIN_FORMATS = {"default": ("{timestamp!d:%b%d %R::<12} {state:<8.8} {ranks:<8.8+} "
                             "{reason:<30.30+} {nodelist}"),
                 "long": ("{timestamp!d:%FT%T::<20} {state:<8.8} {ranks:<8.8+} "
                          "{reason:<30.30+} {nodelist}")}
STATUS_HEADINGS = {"state": "STATE", "up": "UP", "nnodes": "NNODES", "ncores": "NCORES",
                   "ranks": "RANKS", "nodelist": "NODELIST", "reason": "REASON",
                   "timestamp": "TIMESTAMP"}


def _states(choices, default):
    """A -s callback: a comma list of `choices`; "all" means every one unless it is a row."""
    allowed = choices if "all" in choices else choices + ("all",)

    def parse(ctx, param, value):
        if value is None:
            return list(default)
        words = [w.strip().lower() for w in value.split(",") if w.strip()]
        bad = [w for w in words if w not in allowed]
        if bad or not words:
            raise click.BadParameter(f"invalid state {','.join(bad) or value!r}; "
                                     f"expected some of {','.join(allowed)}")
        return list(choices) if "all" in words and "all" not in choices else words
    return parse


def _targets(ctx, param, value):
    """TARGETS or -i: an idset of ranks or a hostlist (resolved by `_ranks`)."""
    if value is None:
        return None
    try:
        idset.decode(value)
    except ValueError:
        try:
            hostlist.decode(value)
        except ValueError:
            raise click.BadParameter(f"{value!r} is neither an idset of ranks nor a "
                                     "hostlist") from None
    return value


def _ranks(text: str, hosts: list[str]) -> set[int]:
    """The ranks named by an idset, or by a hostlist of `hosts` (as Flux, naming one
    that does not exist is no error)."""
    from .jobselect import include_ranks
    return include_ranks(text, hosts)


def _keep(h, include: str | None, queues: str | None, view: dict | None = None):
    """The ranks -i and -q leave (None: all); -q names queues of the scheduler's view."""
    keep = None
    if include is not None:
        keep = _ranks(include, api.hosts(h))
    if queues is not None:
        view = view or api.sched_view(h)
        known = view.get("queues", {})
        wanted = [q.strip() for q in queues.split(",") if q.strip()]
        bad = [q for q in wanted if q not in known]
        if bad:
            raise click.BadParameter(f"unknown queue {bad[0]!r}" + (
                f" (queues: {', '.join(known)})" if known else " (no queues are configured)"),
                param_hint="--queue")
        in_queues = set().union(*(idset.decode(known[q]) for q in wanted))
        keep = in_queues if keep is None else keep & in_queues
    return keep


QUEUE = click.option("-q", "--queue", "queues", default=None, metavar="QUEUE,...",
                     help="Only the resources of these queues.")
INCLUDE = click.option("-i", "--include", default=None, callback=_targets,
                       metavar="TARGETS", help="Only these ranks (an idset) or hosts (a "
                                               "hostlist).")


def _print(out: OutputFormat, rows: list[dict], no_header: bool) -> None:
    lines = [out.format(r) for r in rows]  # a bad spec fails before any output
    if not no_header:
        lines.insert(0, out.header())
    if lines:
        click.echo("\n".join(lines))


@click.group(context_settings=HELP)
def resource():
    """Show and change resources: list, status, info, R, eventlog, drain, undrain."""


@resource.command("list", context_settings=HELP)
@click.option("-s", "--states", "which", default=None,
              callback=_states(LIST_STATES, ("free", "allocated", "down")),
              metavar="STATE,...", help="Rows to show: up, down, allocated, free, all "
                                        "(default: free,allocated,down).")
@click.option("-n", "--no-header", is_flag=True, help="Do not print the header line.")
@click.option("-o", "--format", "fmt", default="default", metavar="FORMAT",
              help="A format string over {state} {queue} {properties} {nnodes} {ncores} "
                   "{ngpus} {nodelist} {ranks}.")
@click.option("--json", "as_json", is_flag=True, help="Print the scheduler's view as JSON.")
@QUEUE
@INCLUDE
@click.option("--skip-empty/--no-skip-empty", default=None,
              help="Leave out rows with no resources (the default with -i).")
def list_(which, no_header, fmt, as_json, queues, include, skip_empty):
    """Show the scheduler's view of resources: free, allocated and down nodes, cores and
    GPUs, by queue and properties where there are some."""
    if not as_json:
        OutputFormat(fmt, LIST_HEADINGS, LIST_FORMATS)   # a bad format fails first
    with handle() as h:
        view = api.sched_view(h)
        hosts = [] if as_json else api.hosts(h)
        keep = _keep(h, include, queues, view)
    if as_json:
        click.echo(json.dumps(view))
        return
    props = {p: idset.decode(r) for p, r in view.get("properties", {}).items()}
    named = {q: idset.decode(r) for q, r in view.get("queues", {}).items()
             if queues is None or q in queues.split(",")}
    if fmt == "default" and (props or named):
        fmt = LIST_DEFAULT_QUEUES if named else LIST_DEFAULT_PROPERTIES
    out = OutputFormat(fmt, LIST_HEADINGS, LIST_FORMATS)
    rows = _list_rows(view, which, props, named, hosts, keep)
    if skip_empty or (skip_empty is None and include is not None):
        rows = [r for r in rows if r["nnodes"]]
    _print(out, rows, no_header)


def _list_rows(view: dict, which: list[str], props: dict, queues: dict,
               hosts: list[str], keep: set[int] | None = None) -> list[dict]:
    """One row per state, and within it per group of nodes with the same properties
    (and queues), as Flux's `resource list`: a state with no nodes is one empty row."""
    gview = view.get("gpus", {})
    everything = view["all"]
    sets = {"all": everything, "free": view["free"], "allocated": view["allocated"],
            "down": view["down"],
            "up": {r: c for r, c in everything.items() if r not in view["down"]}}
    gsets = {"all": gview.get("all", {}), "free": gview.get("free", {}),
             "allocated": gview.get("allocated", {}), "down": gview.get("down", {})}
    gsets["up"] = {r: g for r, g in gsets["all"].items() if r not in view["down"]}
    rows = []
    for state in which:
        cores, gpus = sets[state], gsets[state]
        groups: dict[tuple, list[int]] = {}
        for r in sorted(set(map(int, cores)) | set(map(int, gpus))):
            if keep is not None and r not in keep:
                continue
            key = (",".join(q for q in queues if r in queues[q]),
                   ",".join(sorted(p for p in props if r in props[p])))
            groups.setdefault(key, []).append(r)
        for (queue, properties), ranks in sorted(groups.items()) or [(("", ""), [])]:
            rows.append({"state": state, "nnodes": len(ranks),
                         "ncores": sum(len(cores.get(str(r), ())) for r in ranks),
                         "ngpus": sum(len(gpus.get(str(r), ())) for r in ranks),
                         "queue": queue, "properties": properties,
                         "propertiesx": properties, "ranks": idset.encode(ranks),
                         "nodelist": hostlist.of_ranks(hosts, ranks)})
    return rows


def _rank_state(info: dict, busy: bool) -> str:
    if info["lost"]:
        return "lost"
    if info.get("excluded"):
        return "exclude"
    if info["drained"] is not None:
        return "draining" if busy else "drained"
    if not info["online"]:
        return "offline"
    return "torpid" if info["torpid"] else "avail"


def _status(h, keep: set[int] | None = None) -> dict:
    """resource.status (of the ranks in `keep`, when given), with the ranks where a
    job holds cores (`busy`) from the scheduler (only asked when some rank is
    drained)."""
    st = h.call("resource.status", nodeid=0)
    if keep is not None:
        st["ranks"] = {r: v for r, v in st["ranks"].items() if int(r) in keep}
    st["busy"] = set()
    if any(info["drained"] is not None for info in st["ranks"].values()):
        view = api.sched_view(h)
        st["busy"] = {str(r) for r, cores in view["allocated"].items() if cores}
    return st


def _status_rows(st: dict, out: OutputFormat, which) -> list[dict]:
    """One row per (state, up[, reason][, timestamp]) group of ranks."""
    marks = ("✔", "✗") if utf8_locale() else ("y", "n")
    by_reason = "reason" in out.fields
    by_time = "timestamp" in out.fields
    groups: dict[tuple, list[int]] = {}
    cores: dict[tuple, int] = {}
    for r, info in st["ranks"].items():
        state = _rank_state(info, r in st["busy"])
        if state not in which:
            continue
        key = (STATUS_STATES.index(state), not info["online"],
               (info["drained"] or "") if by_reason else "",
               (info["drain_time"] or 0.0) if by_time else 0.0)
        groups.setdefault(key, []).append(int(r))
        cores[key] = cores.get(key, 0) + len(idset.decode(info["cores"]))
    rows = []
    for key in sorted(groups):
        ranks = sorted(groups[key])
        rows.append({"state": STATUS_STATES[key[0]], "up": marks[key[1]],
                     "nnodes": len(ranks), "ncores": cores[key],
                     "ranks": idset.encode(ranks),
                     "nodelist": hostlist.encode(st["ranks"][str(r)]["hostname"]
                                                 for r in ranks),
                     "reason": key[2], "timestamp": key[3]})
    return rows


@resource.command(context_settings=HELP)
@click.option("-s", "--states", "which", default=None,
              callback=_states(STATUS_STATES, STATUS_STATES), metavar="STATE,...",
              help="Only these states: avail, exclude, torpid, draining, drained, offline, "
                   "lost, all.")
@click.option("-n", "--no-header", is_flag=True, help="Do not print the header line.")
@click.option("-o", "--format", "fmt", default="default", metavar="FORMAT",
              help="default, long (with the drain reason), or a format string over "
                   "{state} {up} {nnodes} {ncores} {ranks} {nodelist} {reason} {timestamp}.")
@click.option("--json", "as_json", is_flag=True, help="Print every rank's state as JSON.")
@QUEUE
@INCLUDE
@click.option("--skip-empty", is_flag=True,
              help="Leave out rows with no resources (there are none here).")
def status(which, no_header, fmt, as_json, queues, include, skip_empty):
    """Show the state of every rank: avail, exclude (resource.exclude: never
    scheduled), torpid, draining (drained, a job still runs there), drained,
    offline or lost.

    UP is ✔ for a rank whose broker is online, ✗ otherwise (y/n without UTF-8).
    """
    out = None if as_json else OutputFormat(fmt, STATUS_HEADINGS, STATUS_FORMATS)
    with handle() as h:
        st = _status(h, _keep(h, include, queues))
    if as_json:
        st["busy"] = sorted(st["busy"], key=int)
        click.echo(json.dumps(st))
        return
    _print(out, _status_rows(st, out, which), no_header)


@resource.command(context_settings=HELP)
@click.option("-n", "--no-header", is_flag=True, help="Do not print the header (listing).")
@click.option("-o", "--format", "fmt", default="default", metavar="FORMAT",
              help="Listing format: default, long, or a format string over "
                   "{timestamp} {state} {ranks} {reason} {nodelist} {nnodes}.")
@click.option("-f", "--force", is_flag=True,
              help="Drain ranks that are drained already, replacing their reason.")
@click.option("-u", "--update", is_flag=True,
              help="Drain ranks that are drained already, keeping their reason and time.")
@QUEUE
@INCLUDE
@click.argument("targets", required=False, callback=_targets)
@click.argument("reason", nargs=-1)
def drain(no_header, fmt, force, update, queues, include, targets, reason):
    """Drain the ranks in TARGETS (an idset such as 1-2), saying why in REASON.

    Drained ranks get no new jobs; running jobs carry on (the rank is
    "draining" until they end).  A rank drained already is refused unless
    --force (new reason) or --update (old reason kept) is given.  Without
    TARGETS, list the draining and drained ranks.
    """
    if force and update:
        raise click.UsageError("--force and --update cannot be used together")
    with handle() as h:
        if targets is not None:
            req = {"targets": _idset_of(h, targets), "reason": " ".join(reason)}
            if force or update:
                req["mode"] = "overwrite" if force else "update"
            h.call("resource.drain", req, nodeid=0)
            return
        st = _status(h, _keep(h, include, queues))
    out = OutputFormat(fmt, STATUS_HEADINGS, DRAIN_FORMATS)
    _print(out, _status_rows(st, out, DRAIN_STATES), no_header)


@resource.command(context_settings=HELP)
@click.option("-f", "--force", count=True,
              help="Targets that are not drained are no error.")
@click.option("-u", "--update", is_flag=True,
              help="Targets that are not drained are no error.")
@click.argument("targets", callback=_targets)
@click.argument("reason", nargs=-1)
def undrain(force, update, targets, reason):
    """Return the drained ranks in TARGETS (ranks such as 1-2, or hosts) to service.

    REASON is accepted as Flux's (fluxlite keeps no undrain reason)."""
    del reason
    with handle() as h:
        ranks = _idset_of(h, targets)
        if force or update:   # only those drained: the others are no error
            drained = {int(r) for r, v in h.call("resource.status", nodeid=0)[
                "ranks"].items() if v["drained"] is not None}
            ranks = idset.encode(sorted(idset.decode(ranks) & drained))
            if not ranks:
                return
        h.call("resource.undrain", {"targets": ranks}, nodeid=0)


def _idset_of(h, targets: str) -> str:
    """TARGETS as an idset of ranks (a hostlist resolved with the instance's hosts)."""
    try:
        idset.decode(targets)
        return targets
    except ValueError as exc:
        why = str(exc)
    ranks = _ranks(targets, api.hosts(h))
    if not ranks:
        raise click.BadParameter(f"{why}, and no rank is on a host named in {targets!r}",
                                 param_hint="TARGETS")
    return idset.encode(sorted(ranks))



# ---------------------------------------------- info, R, eventlog (flux-resource(1))
def _selected(h, which: list[str], include: str | None,
              queues: str | None = None) -> dict[int, list[int]]:
    """rank -> cores of the ranks in the states `which` (the scheduler's view), limited
    to those -i (ranks or hosts) and -q (queues) name."""
    view = api.sched_view(h)
    keep = _keep(h, include, queues, view)
    sets = {"all": view["all"], "free": view["free"], "allocated": view["allocated"],
            "down": view["down"],
            "up": {r: c for r, c in view["all"].items() if r not in view["down"]}}
    out: dict[int, set[int]] = {}
    for state in which:
        for r, cores in sets[state].items():
            out.setdefault(int(r), set()).update(cores)
    if keep is not None:
        out = {r: c for r, c in out.items() if r in keep}
    return {r: sorted(c) for r, c in sorted(out.items())}


@resource.command(context_settings=HELP)
@click.option("-s", "--states", "which", default=None, callback=_states(LIST_STATES, ("all",)),
              metavar="STATE,...", help="Only resources in these states: up, down, "
                                        "allocated, free, all (default: all).")
@INCLUDE
@QUEUE
def info(which, include, queues):
    """One line: how many nodes, cores and GPUs ('4 Nodes, 8 Cores, 0 GPUs')."""
    with handle() as h:
        sel = _selected(h, which, include, queues)
    click.echo(f"{len(sel)} Nodes, {sum(len(c) for c in sel.values())} Cores, 0 GPUs")


@resource.command("R", context_settings=HELP)
@click.option("-s", "--states", "which", default=None, callback=_states(LIST_STATES, ("all",)),
              metavar="STATE,...", help="Only resources in these states (default: all).")
@INCLUDE
@QUEUE
def resource_R(which, include, queues):  # noqa: N802 - the command is called R
    """Print the instance's resources (or those in STATES) as R, RFC 20's JSON."""
    from ..job import rset
    with handle() as h:
        sel = _selected(h, which, include, queues)
        hosts = api.hosts(h)
    click.echo(json.dumps(rset.build(sel, starttime=0.0, expiration=0.0, hosts=hosts)))


@resource.command("eventlog", context_settings=HELP)
@click.option("-f", "--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("-T", "--time-format", type=click.Choice(["raw", "iso", "offset", "human"]),
              default="raw", show_default=True, help="How timestamps are shown.")
@click.option("-H", "--human", is_flag=True, help="-T human: times relative to the first.")
@click.option("-L", "--color", is_flag=False, flag_value="auto", default=None,
              callback=color_when, metavar="[WHEN]",
              help="always, never or auto (accepted: not colored here).")
@click.option("-F", "--follow", is_flag=True, help="Keep printing entries as they come.")
@click.option("-w", "--wait", "wait_for", default=None, metavar="EVENT",
              help="Follow until EVENT is posted, then exit.")
@click.option("-m", "--match-context", "matches", multiple=True, callback=match_pairs,
              metavar="KEY=VAL", help="With --wait: only an EVENT whose context has "
                                      "KEY equal to VAL (repeatable).")
@click.option("-t", "--timeout", callback=fsd_timeout, default=None, metavar="FSD",
              help="With --follow or --wait: give up after this long.")
@INCLUDE
def resource_eventlog(fmt, time_format, human, color, follow, wait_for, matches, timeout,
                      include):
    """Print the resource eventlog (resource-define, online, offline, drain, undrain,
    torpid, lively, shrink), one entry per line."""
    from ..errors import RPCTimeout
    from .eventprint import EventPrinter
    del color
    follow = follow or wait_for is not None
    with handle() as h:
        keep = _keep(h, include, None)
        show = EventPrinter(fmt, "human" if human else time_format, wait_for, matches,
                             keep)
        if not follow:
            for e in kvs.value(h.call("kvs.lookup", {"key": "resource.eventlog"}, nodeid=0)):
                show(e)
            return
        try:
            flags = kvs.WATCH | kvs.WAITCREATE | kvs.WATCH_APPEND
            for resp in h.stream("kvs-watch.lookup", {"key": "resource.eventlog",
                                                      "flags": flags},
                                 nodeid=0, timeout=timeout):
                for e in kvs.value(resp):
                    if show(e):
                        return
        except RPCTimeout:
            if wait_for is not None:
                raise RPCTimeout(f"timeout waiting for event '{wait_for}'") from None
            return 0


from .resourceadmin import COMMANDS as _ADMIN  # noqa: E402  (reload, acquire-mute)

for _command in _ADMIN:
    resource.add_command(_command)
