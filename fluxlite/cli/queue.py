"""`fluxlite queue ...`: control the instance's job queues, as flux-queue(1).

    stop [-a | QUEUE] [--nocheckpoint] [-m REASON]      no new job gets resources
    start [-a | QUEUE]                                  scheduling resumes
    status [-v] [QUEUE]                                 submission and scheduling state
    enable [-a | QUEUE] / disable [-a | QUEUE] [-m REASON]
                                                        submissions accepted or refused
    list [-q QUEUE,...] [-n] [-o FORMAT]                each queue: EN ST, limits
    drain [-t FSD]                                      wait until no job is active
    idle [-t FSD] [--quiet]                             wait until no job runs

As Flux's: QUEUE is the free argument (-q/--queue NAME says the same), the
reason is given with -m, and --quiet has no short form.

A disabled queue refuses submissions ("job submission is disabled: REASON")
and leaves the jobs it holds alone; a stopped queue still accepts jobs
(`status` says "Job submission is enabled"); they wait in SCHED until
`queue start`, while other queues' jobs run.  Without [queues] in the config
there is one anonymous queue, so `--all` changes nothing; with named queues,
stop and start need --queue NAME or --all.  In an instance with a state
directory (-Sstatedir), a stopped queue stays stopped, with its reason,
across a restart, unless it was stopped with `--nocheckpoint`.
"""

from __future__ import annotations

import click

from ..errors import RPCTimeout
from ..jobapi import api
from ..util import fsd
from .common import HELP, fsd_timeout, handle


def _enable_line(status: dict) -> str:
    if status.get("enable", True):
        return "Job submission is enabled"
    return f"Job submission is disabled: {status.get('disable_reason', '')}"


def _start_line(status: dict) -> str:
    if status["start"]:
        return "Scheduling is started"
    reason = status.get("stop_reason")
    return f"Scheduling is stopped: {reason}" if reason else "Scheduling is stopped"


def _alloc_lines(h) -> list[str]:
    q = api.alloc_query(h)
    return [f"{q['queue_length']} alloc requests queued",
            f"{q['alloc_pending']} alloc requests pending to scheduler",
            f"{q['running']} running jobs"]


def _queue_option(fn):
    """QUEUE as Flux's: the free argument, or -q/--queue NAME (its older form)."""
    fn = click.argument("queue_arg", metavar="[QUEUE]", required=False)(fn)
    return click.option("-q", "--queue", "name", default=None, metavar="NAME",
                        help="The named queue (as the QUEUE argument).")(fn)


def _which(name: str | None, queue_arg: str | None) -> str | None:
    if name is not None and queue_arg is not None and name != queue_arg:
        raise click.UsageError(f"Conflicting queues specified as --queue={name} and "
                               f"{queue_arg}")
    return name if name is not None else queue_arg


def _statuses(h, name, verbose: bool) -> list[tuple[str | None, dict]]:
    """(queue name or None, status) to print, as Flux's: QUEUE's alone, named; without
    QUEUE, or with -v, every named queue's (the anonymous queue's where none is)."""
    s = api.queue_status(h, None if verbose else name)
    if "queues" in s:
        return list(s["queues"].items())
    return [(name, s)]


def _status_lines(h, name, verbose: bool, *lines) -> list[str]:
    """Each queue's lines (`lines` of its status), prefixed `NAME: ` where it has one."""
    return [f"{q}: {line(qs)}" if q else line(qs)
            for q, qs in _statuses(h, name, verbose) for line in lines]


@click.group(context_settings=HELP)
def queue():
    """Control the job queue: stop, start, enable, disable, status, list, drain, idle."""


@queue.command(context_settings=HELP)
@click.option("-v", "--verbose", is_flag=True, help="Also show the job-manager's alloc counts.")
@_queue_option
def status(verbose, name, queue_arg):
    """Say whether jobs may be submitted and whether they are scheduled (each named
    queue's, or QUEUE's)."""
    name = _which(name, queue_arg)
    with handle() as h:
        lines = _status_lines(h, name, verbose, _enable_line, _start_line)
        lines += _alloc_lines(h) if verbose else []
    click.echo("\n".join(lines))


def _common(fn):
    fn = _queue_option(fn)
    fn = click.option("--quiet", is_flag=True, help="Print only errors.")(fn)
    fn = click.option("-v", "--verbose", is_flag=True,
                      help="Also show the job-manager's alloc counts.")(fn)
    fn = click.option("-a", "--all", "all_", is_flag=True,
                      help="All queues (needed, or --queue, where queues are named).")(fn)
    return fn


def _report(h, name, line, verbose: bool, alloc: bool = True) -> None:
    """What a queue change left: `line` of the queue's status (QUEUE's, else each named
    queue's), and for start/stop --verbose the scheduler's allocation lines."""
    lines = _status_lines(h, name, verbose, line)
    if verbose and alloc:
        lines += _alloc_lines(h)
    click.echo("\n".join(lines))


def _start(start: bool, all_: bool, verbose: bool, quiet: bool, name, **kw) -> None:
    with handle() as h:
        api.queue_start(h, start, all_queues=all_, name=name, **kw)
        if not quiet:
            _report(h, name, _start_line, verbose)


@queue.command(context_settings=HELP)
@_common
@click.option("--nocheckpoint", is_flag=True,
              help="Do not keep the stop across a restart (with -Sstatedir): the next "
                   "start has the queue started.")
@click.option("-m", "--message", default=None, metavar="REASON",
              help="Why scheduling is stopped (shown by `queue status`).")
def stop(all_, verbose, quiet, name, queue_arg, nocheckpoint, message):
    """Stop scheduling: pending jobs stay queued and running ones keep running, but no
    job gets resources until `queue start`.  Submissions are still accepted."""
    name = _which(name, queue_arg)
    text = message or ""
    if "\n" in text:
        raise click.BadParameter("the reason must be one line", param_hint="REASON")
    _start(False, all_, verbose, quiet, name, nocheckpoint=nocheckpoint,
           reason=text or None)


@queue.command(context_settings=HELP)
@_common
def start(all_, verbose, quiet, name, queue_arg):
    """Start scheduling again: pending jobs get resources in priority order."""
    _start(True, all_, verbose, quiet, _which(name, queue_arg))


def _wait(call, timeout: float | None, waiting_for: str):
    with handle() as h:
        try:
            return call(h, timeout)
        except RPCTimeout:
            raise RPCTimeout(f"timeout: {waiting_for} after {fsd.format(timeout)} "
                             "(--timeout)") from None


@queue.command(context_settings=HELP)
@click.option("-t", "--timeout", callback=fsd_timeout, default=None, metavar="FSD",
              help="Give up after this long (exit 1): 0.5s, 10, 2m or none.")
def drain(timeout):
    """Wait until no job is active (every job submitted so far is INACTIVE)."""
    _wait(api.queue_drain, timeout, "jobs still active")


@queue.command(context_settings=HELP)
@click.option("-t", "--timeout", callback=fsd_timeout, default=None, metavar="FSD",
              help="Give up after this long (exit 1): 0.5s, 10, 2m or none.")
@click.option("-q", "--quiet", is_flag=True,
              help="Do not print how many jobs are pending, unless some are.")
def idle(timeout, quiet):
    """Wait until no job is running or cleaning up; print how many are pending."""
    pending = _wait(api.queue_idle, timeout, "jobs still running")
    if not quiet or pending > 0:
        click.echo(f"{pending} jobs")


def _enable(enable: bool, all_: bool, verbose: bool, quiet: bool, name=None,
            reason=None) -> None:
    with handle() as h:
        api.queue_enable(h, enable, all_queues=all_, reason=reason, name=name)
        if not quiet:
            _report(h, name, _enable_line, verbose, alloc=False)


@queue.command(context_settings=HELP)
@_common
def enable(all_, verbose, quiet, name, queue_arg):
    """Accept job submissions again."""
    _enable(True, all_, verbose, quiet, _which(name, queue_arg))


@queue.command(context_settings=HELP)
@_common
@click.option("-m", "--message", default=None, metavar="REASON",
              help="Why submissions are refused (default: disabled by administrator).")
@click.option("--nocheckpoint", is_flag=True,
              help="Accepted (whether a disabled queue stays so across a restart is "
                   "not kept here).")
def disable(all_, verbose, quiet, name, queue_arg, message, nocheckpoint):
    """Refuse job submissions (each refused one says REASON); jobs already submitted
    are scheduled and run as before."""
    del nocheckpoint
    text = message or ""
    if "\n" in text:
        raise click.BadParameter("the reason must be one line", param_hint="REASON")
    _enable(False, all_, verbose, quiet, _which(name, queue_arg),
            reason=text or "disabled by administrator")


LIST_FORMATS = {"default": ("{enabled:>2} {started:>2} {defaults.timelimit!F:>8} "
                            "{limits.timelimit!F:>8} {limits.range.effective.nnodes:>10} "
                            "{limits.range.effective.ncores:>10} "
                            "{limits.range.effective.ngpus:>10}")}
LIST_HEADINGS = {"queue": "QUEUE", "queuem": "QUEUE", "submission": "SUBMIT",
                 "scheduling": "SCHED", "enabled": "EN", "started": "ST",
                 "defaults.timelimit": "TDEFAULT", "limits.timelimit": "TLIMIT",
                 "limits.range.effective.nnodes": "NNODES",
                 "limits.range.effective.ncores": "NCORES",
                 "limits.range.effective.ngpus": "NGPUS",
                 "resources.all.nnodes": "NODES", "resources.all.ncores": "CORES",
                 "resources.all.ngpus": "GPUS"}


@queue.command("list", context_settings=HELP)
@click.option("-n", "--no-header", is_flag=True, help="Do not print the header line.")
@click.option("-o", "--format", "fmt", default="default", metavar="FORMAT",
              help="A format string over " + " ".join(f"{{{k}}}" for k in LIST_HEADINGS)
              + ".")
@click.option("-q", "--queue", "queues", multiple=True, metavar="QUEUE,...",
              help="Only these queues (repeatable).")
def list_(no_header, fmt, queues):
    """List the queues with EN (submissions enabled), ST (scheduling started), the
    default and largest time limits (∞: none) and the nodes, cores and GPUs a job
    may ask for.  The one queue of an instance without named queues has no name."""
    from ..util.fluid import utf8_locale
    from .outformat import OutputFormat
    out = OutputFormat(fmt, LIST_HEADINGS, LIST_FORMATS)
    yes, no = ("✔", "✗") if utf8_locale() else ("y", "n")
    with handle() as h:
        st = api.queue_status(h)
        view = api.sched_view(h)
    from ..util import idset
    up = {r: c for r, c in view["all"].items() if r not in view["down"]}
    gpus = view.get("gpus", {}).get("all", {})
    each = st.get("queues") or {"": st}
    wanted = {q.strip() for v in queues for q in v.split(",") if q.strip()}
    if wanted:
        bad = sorted(wanted - set(each))
        if bad:
            raise click.BadParameter(f"unknown queue {bad[0]!r}", param_hint="--queue")
        each = {k: v for k, v in each.items() if k in wanted}
    rows = []
    for name, qs in each.items():
        ranks = ({str(r) for r in idset.decode(view["queues"][name])}
                 if name and name in view.get("queues", {}) else set(view["all"]))
        mine = {r: c for r, c in up.items() if r in ranks}
        nnodes, ncores = len(mine), sum(len(c) for c in mine.values())
        ngpus = sum(len(gpus.get(r, ())) for r in mine)
        rows.append({
            "queue": name, "queuem": name, "enabled": yes if qs.get("enable", True) else no,
            "started": yes if qs["start"] else no,
            "submission": "enabled" if qs.get("enable", True) else "disabled",
            "scheduling": "started" if qs["start"] else "stopped",
            "defaults.timelimit": float("inf"), "limits.timelimit": float("inf"),
            "limits.range.effective.nnodes": f"0-{nnodes}",
            "limits.range.effective.ncores": f"0-{ncores}",
            "limits.range.effective.ngpus": f"0-{ngpus}",
            "resources.all.nnodes": nnodes, "resources.all.ncores": ncores,
            "resources.all.ngpus": ngpus})
    if fmt == "default" and "queues" in st:   # as Flux's, a QUEUE column for named queues
        out = OutputFormat("{queue:<8.8} " + LIST_FORMATS["default"], LIST_HEADINGS,
                           LIST_FORMATS)
    lines = [out.format(row) for row in rows]
    if not no_header:
        lines.insert(0, out.header())
    click.echo("\n".join(lines))

