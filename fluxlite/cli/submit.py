"""`fluxlite run` and `fluxlite submit`."""

from __future__ import annotations

import os
import re
import sys

import click

from ..errors import UsageError
from ..job.states import WAITABLE
from ..util import fluid, idset
from .common import NO_INTERSPERSED, handle
from .options import COMMON, IO, TASKS, apply, jobspec_from


@click.command(context_settings=NO_INTERSPERSED)
@apply(TASKS + COMMON + IO)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(command, **params):
    """Run COMMAND as a job, show its output as it comes, and exit with its exit code.

    Ctrl-C as Flux: the first keeps the job and says what comes next, a second within
    2 s cancels it, Ctrl-Z within 2 s of the first detaches (the job runs on).
    """
    from ..job import api
    from .attach import Attach
    ranks = _input_ranks(params.get("input"))
    extra = None
    if ranks is not None:
        # Flux's run form: --input=RANKS sends run's stdin to those tasks only
        params["input"] = None
        forward = True
        extra = {"input": 1, "input.ranks": ranks}
    else:
        forward = not params.get("input") and _stdin_has_data()
        extra = {"input": 1} if forward else None
    spec = jobspec_from(list(command), params, extra_options=extra)
    if ranks is not None:
        _check_input_ranks(ranks, spec)
    with handle() as h:
        resp = api.submit_full(h, spec, params["urgency"])
        attach = Attach(h, resp["id"], label_io=params["label_io"], prog="fluxlite run")
        attach.forward_stdin = forward
        code = attach.run()
    sys.exit(code)


def _input_ranks(value: str | None) -> str | None:
    """`run --input=RANKS`: an idset of task ranks (as in Flux's run; a file whose name
    is an idset is given as ./NAME); None for a file name."""
    if not value or not value[0].isdigit():
        return None
    from ..util import idset
    try:
        return idset.encode(idset.decode(value))
    except ValueError:
        return None


def _check_input_ranks(ranks: str, spec: dict) -> None:
    """`run --input=RANKS` names tasks the job has (0 to ntasks-1)."""
    from ..job.schema import request
    ntasks = request(spec).ntasks
    if ntasks is None:  # one task per node of a whole-node request: known at alloc
        return
    beyond = [r for r in sorted(idset.decode(ranks)) if r >= ntasks]
    if beyond:
        raise UsageError(f"--input={ranks}: no task {beyond[0]}: the job's task ranks "
                         f"are 0-{ntasks - 1}" if ntasks > 1 else
                         f"--input={ranks}: no task {beyond[0]}: the job has task 0 only")


def refuse_per_task_input(params: dict) -> None:
    """submit and bulksubmit read --input from a file: task ranks are run's only (as Flux)."""
    value = params.get("input")
    if _input_ranks(value) is not None:
        raise UsageError(f"--input={value}: per-task input not supported for submit "
                         f"(run takes task ranks; a file named {value} is ./{value})")


def _stdin_has_data() -> bool:
    """A pipe or a regular file on stdin is forwarded to the tasks (a terminal or /dev/null
    is not: tasks of `run` then read nothing, as batch jobs do)."""
    import stat
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode) or stat.S_ISSOCK(mode)


# how submit and bulksubmit make copies, and what they do once the jobs are in
SUBMIT = [
    click.Option(["--cc"], default=None, metavar="IDSET",
                 help="Submit one copy per id in IDSET; {cc} in the command, in --output, "
                      "--error, --input, --job-name, --cwd and --env values, and "
                      "FLUXLITE_JOB_CC in the environment are the copy's id."),
    click.Option(["--quiet"], is_flag=True, help="Do not print job ids."),
    click.Option(["--wait"], is_flag=True,
                 help="Wait for the jobs to finish; exit with the largest exit code."),
    click.Option(["--watch"], is_flag=True, help="Wait for the jobs and show their output."),
    click.Option(["--progress"], is_flag=True, help="Wait for the jobs with a progress bar."),
    click.Option(["--flags"], default=None, metavar="FLAGS", expose_value=False,
                 callback=lambda ctx, param, value: _flags(value),
                 help="Submit flags, comma-separated: waitable (accepted: every job is "
                      "waitable)."),
]


def _flags(value: str | None) -> None:
    """Flux's --flags: only `waitable` is meaningful here, and it is the default."""
    if value is None:
        return
    for flag in value.split(","):
        if flag.strip() != "waitable":
            raise click.BadParameter(f"unknown flag {flag.strip()!r}: only 'waitable' is "
                                     "supported (every job is waitable)")


@click.command(context_settings=NO_INTERSPERSED)
@apply(TASKS + COMMON + IO + SUBMIT)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def submit(command, cc, quiet, wait, watch, progress, **params):
    """Submit COMMAND as a job and print its id."""
    copies = with_cc(list(command), params, cc)
    for _, p in copies:
        refuse_per_task_input(p)
    specs = [jobspec_from(argv, p) for argv, p in copies]
    sys.exit(submit_all(specs, params, quiet=quiet, wait=wait, watch=watch,
                        progress=progress, prog="fluxlite submit"))


# options that take a path or a name: {cc} is expanded in them as in the command
CC_OPTIONS = ("output", "error", "input", "job_name", "cwd")


# {cc}, but not inside the mustache tag {{cc}} (a doubled brace is not this field)
_CC = re.compile(r"(?<!\{)\{cc\}(?!\})")


def with_cc(command: list[str], params: dict, cc: str | None) -> list[tuple[list[str], dict]]:
    """(command, params) for each copy --cc asks for: {cc} replaced by the copy's id in
    the command and in the path and name options, FLUXLITE_JOB_CC set; one unchanged
    pair without --cc."""
    if cc is None:
        return [(command, params)]
    try:
        ccs = sorted(idset.decode(cc))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--cc") from None
    if not ccs:
        raise click.BadParameter("empty idset", param_hint="--cc")
    out = []
    for i in ccs:
        def sub(text, i=str(i)):
            return _CC.sub(i, text) if isinstance(text, str) else text
        p = dict(params)
        for key in CC_OPTIONS:
            p[key] = sub(p.get(key))
        p["env_rules"] = tuple(sub(r) for r in params.get("env_rules") or ()) + \
            (f"FLUXLITE_JOB_CC={i}",)
        out.append(([sub(a) for a in command], p))
    return out


def submit_all(specs: list[dict], params: dict, *, quiet: bool, wait: bool, watch: bool,
               progress: bool, prog: str, urgencies: list[int] | None = None) -> int:
    """Submit the jobspecs, print their ids, and wait or watch as asked; the exit code.
    Each job's urgency is params' unless `urgencies` gives one per jobspec."""
    if progress and not sys.stdout.isatty():  # as Flux: a bar is for a terminal
        print(f"{prog}: stdout is not a tty. Ignoring --progress option", file=sys.stderr)
        progress = False
    wait = wait or progress
    rc = 0
    with handle() as h:
        from ..job import api
        # a job waited for is submitted waitable: not purged before its wait arrives
        flags = WAITABLE if wait else 0
        urgencies = urgencies or [params["urgency"]] * len(specs)
        pending = [api.submit_async(h, s, u, flags) for s, u in zip(specs, urgencies)]
        ids, refused = [], set()
        for p in pending:
            h.wait(p)
            resp = p.take()
            ids.append(resp["id"])
            if not quiet:
                click.echo(fluid.f58(resp["id"]))
            if "exception" in resp:
                ex = resp["exception"]
                print(f"{prog}: job {fluid.f58(resp['id'])}: {ex['note']}", file=sys.stderr)
                refused.add(resp["id"])
                rc = 1
        if watch:
            from .attach import Attach
            for jobid in ids:
                rc = max(rc, Attach(h, jobid, label_io=params["label_io"], prog=prog).run())
        elif wait:
            rc = max(rc, _wait_all(h, ids, progress, said=refused))
    return rc


def _wait_all(h, ids: list[int], progress: bool, said: set[int]) -> int:
    """Wait for the jobs; the largest exit code.  Each job that failed before it
    started gets one line saying why, unless its refusal at submit was `said`."""
    from ..job import api
    results = []
    if progress:
        from rich.progress import Progress
        with Progress(transient=False) as bar:
            task = bar.add_task("jobs", total=len(ids))
            for r in api.wait_many(h, ids):
                results.append(r)
                bar.update(task, advance=1)
    else:
        results = list(api.wait_many(h, ids))
    for r in results:
        if not r["success"] and r["id"] not in said:
            _why_not_started(h, r)
    return max((r["returncode"] or 0 for r in results), default=0)


def _why_not_started(h, result: dict) -> None:
    """The fatal exception of a waited-for job that ended before it started (a
    dependency never met, an input file not found...), on stderr as Flux's --wait
    shows it: tasks that ran have said why themselves."""
    from ..errors import FluxliteError
    from ..job import api
    from .attach import exception_line
    try:
        events = list(api.event_watch(h, result["id"], follow=False))
    except FluxliteError:  # purged since: its wait answer says why
        print(f"job.exception {fluid.f58(result['id'])} {result['errstr']}", file=sys.stderr)
        return
    for e in events:
        if e["name"] == "start":
            return
        ctx = e.get("context") or {}
        if e["name"] == "exception" and ctx.get("severity", 0) == 0:
            print(exception_line(result["id"], ctx), file=sys.stderr)
            return
