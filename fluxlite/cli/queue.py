"""`fluxlite queue ...`: control the instance's one job queue, as flux-queue(1).

    stop [-a] [--nocheckpoint] [-m REASON | REASON...]   no new job gets resources
    start [-a]                                           scheduling resumes
    status [-v]                                          submission and scheduling state
    drain [--timeout=FSD]                                wait until no job is active
    idle [--timeout=FSD] [-q]                            wait until no job runs

A stopped queue still accepts jobs (`status` says "Job submission is
enabled"); they wait in SCHED until `queue start`.  There is one anonymous
queue, so `--all` changes nothing.  In an instance with a state directory
(-Sstatedir), a stopped queue stays stopped, with its reason, across a
restart, unless it was stopped with `--nocheckpoint`.
"""

from __future__ import annotations


import click

from ..errors import RPCTimeout
from ..job import api
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


@click.group(context_settings=HELP)
def queue():
    """Control the job queue: stop, start, status, drain, idle."""


@queue.command(context_settings=HELP)
@click.option("-v", "--verbose", is_flag=True, help="Also show the job-manager's alloc counts.")
def status(verbose):
    """Say whether jobs may be submitted and whether they are scheduled."""
    with handle() as h:
        s = api.queue_status(h)
        lines = [_enable_line(s), _start_line(s)] + (_alloc_lines(h) if verbose else [])
    click.echo("\n".join(lines))


def _common(fn):
    fn = click.option("-q", "--quiet", is_flag=True, help="Print only errors.")(fn)
    fn = click.option("-v", "--verbose", is_flag=True,
                      help="Also show the job-manager's alloc counts.")(fn)
    fn = click.option("-a", "--all", "all_", is_flag=True,
                      help="All queues (there is one: accepted for Flux scripts).")(fn)
    return fn


def _start(start: bool, all_: bool, verbose: bool, quiet: bool, **kw) -> None:
    with handle() as h:
        api.queue_start(h, start, all_queues=all_, **kw)
        if quiet:
            return
        lines = [_start_line(api.queue_status(h))]
        if verbose:
            lines += _alloc_lines(h)
    click.echo("\n".join(lines))


@queue.command(context_settings=HELP)
@_common
@click.option("--nocheckpoint", is_flag=True,
              help="Do not keep the stop across a restart (with -Sstatedir): the next "
                   "start has the queue started.")
@click.option("-m", "--message", default=None, metavar="REASON",
              help="Why scheduling is stopped (shown by `queue status`).")
@click.argument("reason", nargs=-1)
def stop(all_, verbose, quiet, nocheckpoint, message, reason):
    """Stop scheduling: pending jobs stay queued and running ones keep running, but no
    job gets resources until `queue start`.  Submissions are still accepted."""
    if message is not None and reason:
        raise click.UsageError("give the reason with -m or as arguments, not both")
    text = message if message is not None else " ".join(reason)
    if "\n" in text:
        raise click.BadParameter("the reason must be one line", param_hint="REASON")
    _start(False, all_, verbose, quiet, nocheckpoint=nocheckpoint, reason=text or None)


@queue.command(context_settings=HELP)
@_common
def start(all_, verbose, quiet):
    """Start scheduling again: pending jobs get resources in priority order."""
    _start(True, all_, verbose, quiet)


def _wait(call, timeout: float | None, waiting_for: str):
    with handle() as h:
        try:
            return call(h, timeout)
        except RPCTimeout:
            raise RPCTimeout(f"timeout: {waiting_for} after {fsd.format(timeout)} "
                             "(--timeout)") from None


@queue.command(context_settings=HELP)
@click.option("--timeout", callback=fsd_timeout, default=None, metavar="FSD",
              help="Give up after this long (exit 1): 0.5s, 10, 2m or none.")
def drain(timeout):
    """Wait until no job is active (every job submitted so far is INACTIVE)."""
    _wait(api.queue_drain, timeout, "jobs still active")


@queue.command(context_settings=HELP)
@click.option("--timeout", callback=fsd_timeout, default=None, metavar="FSD",
              help="Give up after this long (exit 1): 0.5s, 10, 2m or none.")
@click.option("-q", "--quiet", is_flag=True,
              help="Do not print how many jobs are pending, unless some are.")
def idle(timeout, quiet):
    """Wait until no job is running or cleaning up; print how many are pending."""
    pending = _wait(api.queue_idle, timeout, "jobs still running")
    if not quiet or pending > 0:
        click.echo(f"{pending} jobs")
