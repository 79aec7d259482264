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

from ..job import api
from ..util import hostlist, idset
from ..util.fluid import utf8_locale
from .common import HELP, fsd_timeout, handle
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
    if value is None:
        return None
    try:
        idset.decode(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return value


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
def list_(which, no_header, fmt, as_json):
    """Show the scheduler's view of resources: free, allocated and down nodes, cores and
    GPUs, by queue and properties where there are some."""
    if not as_json:
        OutputFormat(fmt, LIST_HEADINGS, LIST_FORMATS)   # a bad format fails first
    with handle() as h:
        view = h.call("sched.resource-status", nodeid=0)
        hosts = [] if as_json else api.hosts(h)
    if as_json:
        click.echo(json.dumps(view))
        return
    props = {p: idset.decode(r) for p, r in view.get("properties", {}).items()}
    queues = {q: idset.decode(r) for q, r in view.get("queues", {}).items()}
    if fmt == "default" and (props or queues):
        fmt = LIST_DEFAULT_QUEUES if queues else LIST_DEFAULT_PROPERTIES
    out = OutputFormat(fmt, LIST_HEADINGS, LIST_FORMATS)
    _print(out, _list_rows(view, which, props, queues, hosts), no_header)


def _list_rows(view: dict, which: list[str], props: dict, queues: dict,
               hosts: list[str]) -> list[dict]:
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


def _status(h) -> dict:
    """resource.status, with the ranks where a job holds cores (`busy`) from the
    scheduler (only asked when some rank is drained)."""
    st = h.call("resource.status", nodeid=0)
    st["busy"] = set()
    if any(info["drained"] is not None for info in st["ranks"].values()):
        view = h.call("sched.resource-status", nodeid=0)
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
def status(which, no_header, fmt, as_json):
    """Show the state of every rank: avail, exclude (resource.exclude: never
    scheduled), torpid, draining (drained, a job still runs there), drained,
    offline or lost.

    UP is ✔ for a rank whose broker is online, ✗ otherwise (y/n without UTF-8).
    """
    out = None if as_json else OutputFormat(fmt, STATUS_HEADINGS, STATUS_FORMATS)
    with handle() as h:
        st = _status(h)
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
@click.argument("targets", required=False, callback=_targets)
@click.argument("reason", nargs=-1)
def drain(no_header, fmt, force, update, targets, reason):
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
            req = {"targets": targets, "reason": " ".join(reason)}
            if force or update:
                req["mode"] = "overwrite" if force else "update"
            h.call("resource.drain", req, nodeid=0)
            return
        st = _status(h)
    out = OutputFormat(fmt, STATUS_HEADINGS, DRAIN_FORMATS)
    _print(out, _status_rows(st, out, DRAIN_STATES), no_header)


@resource.command(context_settings=HELP)
@click.argument("targets", callback=_targets)
def undrain(targets):
    """Return the drained ranks in TARGETS (an idset such as 1-2) to service."""
    with handle() as h:
        h.call("resource.undrain", {"targets": targets}, nodeid=0)



# ---------------------------------------------- info, R, eventlog (flux-resource(1))
def _selected(h, which: list[str], include: str | None) -> dict[int, list[int]]:
    """rank -> cores of the ranks in the states `which` (the scheduler's view), limited
    to the ranks in `include` (an idset) when given."""
    view = h.call("sched.resource-status", nodeid=0)
    sets = {"all": view["all"], "free": view["free"], "allocated": view["allocated"],
            "down": view["down"],
            "up": {r: c for r, c in view["all"].items() if r not in view["down"]}}
    out: dict[int, set[int]] = {}
    for state in which:
        for r, cores in sets[state].items():
            out.setdefault(int(r), set()).update(cores)
    if include is not None:
        keep = idset.decode(include)
        out = {r: c for r, c in out.items() if r in keep}
    return {r: sorted(c) for r, c in sorted(out.items())}


def _include(ctx, param, value):
    return _targets(ctx, param, value)


@resource.command(context_settings=HELP)
@click.option("-s", "--states", "which", default=None, callback=_states(LIST_STATES, ("all",)),
              metavar="STATE,...", help="Only resources in these states: up, down, "
                                        "allocated, free, all (default: all).")
@click.option("-i", "--include", default=None, callback=_include, metavar="RANKS",
              help="Only these ranks (an idset).")
def info(which, include):
    """One line: how many nodes, cores and GPUs ('4 Nodes, 8 Cores, 0 GPUs')."""
    with handle() as h:
        sel = _selected(h, which, include)
    click.echo(f"{len(sel)} Nodes, {sum(len(c) for c in sel.values())} Cores, 0 GPUs")


@resource.command("R", context_settings=HELP)
@click.option("-s", "--states", "which", default=None, callback=_states(LIST_STATES, ("all",)),
              metavar="STATE,...", help="Only resources in these states (default: all).")
@click.option("-i", "--include", default=None, callback=_include, metavar="RANKS",
              help="Only these ranks (an idset).")
def resource_R(which, include):  # noqa: N802 - the command is called R
    """Print the instance's resources (or those in STATES) as R, RFC 20's JSON."""
    from ..job import rset
    with handle() as h:
        sel = _selected(h, which, include)
        hosts = api.hosts(h)
    click.echo(json.dumps(rset.build(sel, starttime=0.0, expiration=0.0, hosts=hosts)))


@resource.command("eventlog", context_settings=HELP)
@click.option("-f", "--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("-H", "--human", is_flag=True, help="Times relative to the first entry.")
@click.option("-F", "--follow", is_flag=True, help="Keep printing entries as they come.")
@click.option("-w", "--wait", "wait_for", default=None, metavar="EVENT",
              help="Follow until EVENT is posted, then exit.")
@click.option("-t", "--timeout", callback=fsd_timeout, default=None, metavar="FSD",
              help="With --follow or --wait: give up after this long.")
def resource_eventlog(fmt, human, follow, wait_for, timeout):
    """Print the resource eventlog (resource-define, online, offline, drain, undrain,
    torpid, lively, shrink), one entry per line."""
    from ..errors import RPCTimeout
    from ..job.eventlog import format_entry
    follow = follow or wait_for is not None
    t0 = [None]

    def show(e) -> bool:
        t0[0] = e.get("timestamp") if t0[0] is None else t0[0]
        click.echo(json.dumps(e) if fmt == "json" else format_entry(e, human=human, t0=t0[0]))
        return wait_for is not None and e.get("name") == wait_for

    with handle() as h:
        if not follow:
            for e in h.call("kvs.get", {"key": "resource.eventlog"}, nodeid=0)["value"]:
                show(e)
            return
        try:
            for resp in h.stream("kvs.watch", {"key": "resource.eventlog", "append": True,
                                               "waitcreate": True}, nodeid=0, timeout=timeout):
                for e in resp["entries"]:
                    if show(e):
                        return
        except RPCTimeout:
            if wait_for is not None:
                raise RPCTimeout(f"timeout waiting for event '{wait_for}'") from None
            return 0
