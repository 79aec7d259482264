"""`fluxlite run` and `fluxlite submit`."""

from __future__ import annotations

import collections
import itertools
import os
import re
import signal
import sys
from collections.abc import Iterable, Iterator

import click

from ..errors import UsageError
from ..job.states import WAITABLE
from ..util import fluid, idset
from .common import NO_INTERSPERSED, handle
from .options import COMMON, IO, SUBMITTING, TASKS, apply, jobspec_from


@click.command(context_settings=NO_INTERSPERSED)
@apply(TASKS + COMMON + IO + SUBMITTING)
@click.option("--wait-event", default=None, metavar="NAME",
              help="Follow the job until event NAME (default: its end); exec.NAME: an "
                   "event of its exec eventlog.")
@click.option("--quiet", is_flag=True, expose_value=False,
              help="Accepted as Flux's (run prints no job id to leave out).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(command, **params):
    """Run COMMAND as a job, show its output as it comes, and exit with its exit code.

    Ctrl-C as Flux: the first keeps the job and says what comes next, a second within
    2 s cancels it, Ctrl-Z within 2 s of the first detaches (the job runs on).
    """
    from ..jobapi import api
    from .attach import Attach, stdin_has_data
    ranks = _input_ranks(params.get("input"))
    extra = None
    if ranks is not None:
        # Flux's run form: --input=RANKS sends run's stdin to those tasks only
        params["input"] = None
        forward = True
        extra = {"input": 1, "input.ranks": ranks}
    else:
        forward = not params.get("input") and stdin_has_data()
        extra = {"input": 1} if forward else None
    spec = jobspec_from(list(command), params, extra_options=extra)
    if ranks is not None:
        _check_input_ranks(ranks, spec)
    if params["dry_run"]:
        dry_run(spec)
    with handle() as h:
        resp = api.submit_full(h, spec, params["urgency"])
        if params["verbose"]:
            print(f"jobid: {fluid.f58(resp['id'])}", file=sys.stderr)
        if "pty.interactive" in (params.get("setopt") or {}):
            # task 0 on a terminal our terminal is attached to, as Flux's run does; with
            # -o pty (pty.capture) the terminal's output is the job's, shown as any
            from .pty import attach_pty
            sys.exit(attach_pty(h, resp["id"], prog="fluxlite run"))
        attach = Attach(h, resp["id"], label_io=params["label_io"], prog="fluxlite run",
                        verbose=params["verbose"], wait_event=params["wait_event"])
        attach.forward_stdin = forward
        code = attach.run()
    sys.exit(code)


def dry_run(spec: dict) -> None:
    """--dry-run: the jobspec on stdout, nothing submitted (as Flux's)."""
    import json
    click.echo(json.dumps(spec))
    sys.exit(0)


def service_stdin(params: dict) -> dict | None:
    """Without --input, the tasks of a submitted job read what `job attach` sends to the
    job's shell (Flux's input.stdin.type=service); nothing until then."""
    return None if params.get("input") else {"input.stdin.type": "service"}


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


# how submit and bulksubmit make copies, and what they do once the jobs are in
SUBMIT = [
    click.Option(["--cc"], default=None, metavar="IDSET",
                 help="Submit one copy per id in IDSET; {cc} in the command, in --output, "
                      "--error, --input, --job-name, --cwd and --env values, and "
                      "FLUXLITE_JOB_CC in the environment are the copy's id."),
    click.Option(["--bcc"], default=None, metavar="IDSET",
                 help="As --cc, but FLUXLITE_JOB_CC is not set: identical copies."),
    click.Option(["--wait-event"], default=None, metavar="NAME",
                 help="Wait until every job has had event NAME (exec.NAME: in its exec "
                      "eventlog); --wait is --wait-event=clean."),
    click.Option(["--log"], default=None, metavar="FILE",
                 help="Write what the command prints (job ids, errors) to FILE."),
    click.Option(["--log-stderr"], default=None, metavar="FILE",
                 help="Write the command's stderr to FILE (apart from --log)."),
    click.Option(["--quiet"], is_flag=True, help="Do not print job ids."),
    click.Option(["--wait"], is_flag=True,
                 help="Wait for the jobs to finish; exit with the largest exit code."),
    click.Option(["--watch"], is_flag=True, help="Wait for the jobs and show their output."),
    click.Option(["--progress"], is_flag=True, help="Wait for the jobs with a progress bar."),
    click.Option(["--jps"], is_flag=True, expose_value=False,
                 help="With --progress, show the jobs' throughput (accepted: the bar "
                      "shows its rate)."),
]


@click.command(context_settings=NO_INTERSPERSED)
@apply(TASKS + COMMON + IO + SUBMIT + SUBMITTING)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def submit(command, cc, quiet, wait, watch, progress, **params):
    """Submit COMMAND as a job and print its id."""
    open_logs(params)
    cc, bcc = cc_or_bcc(cc, params)
    copies = with_cc(list(command), params, cc, set_env=not bcc)
    # built one at a time as they are sent: --cc=1-1000000 holds a window, not a million
    specs = _jobspecs(copies)
    if params["dry_run"]:
        import json
        for s in specs:
            click.echo(json.dumps(s))
        sys.exit(0)
    sys.exit(submit_all(specs, params, quiet=quiet, wait=wait, watch=watch,
                        progress=progress, prog="fluxlite submit"))


def _jobspecs(copies):
    for argv, p in copies:
        refuse_per_task_input(p)
        yield jobspec_from(argv, p, extra_options=service_stdin(p))


# options that take a path or a name: {cc} is expanded in them as in the command
CC_OPTIONS = ("output", "error", "input", "job_name", "cwd")


# {cc}, but not inside the mustache tag {{cc}} (a doubled brace is not this field)
_CC = re.compile(r"(?<!\{)\{cc\}(?!\})")


def cc_or_bcc(cc: str | None, params: dict) -> tuple[str | None, bool]:
    """The idset of copies and whether it came from --bcc (one of the two, as Flux)."""
    bcc = params.pop("bcc", None)
    if cc is not None and bcc is not None:
        raise UsageError("specify only one of --cc or --bcc")
    return (bcc, True) if bcc is not None else (cc, False)


def open_logs(params: dict) -> None:
    """--log FILE / --log-stderr FILE: what the command prints goes to them instead of
    the terminal (stderr to --log too, unless --log-stderr names its own)."""
    log, log_err = params.pop("log", None), params.pop("log_stderr", None)
    if log is None and log_err is None:
        return
    try:
        if log is not None:
            out = open(log, "w", buffering=1)
            os.dup2(out.fileno(), sys.stdout.fileno())
            if log_err is None:
                os.dup2(out.fileno(), sys.stderr.fileno())
        if log_err is not None:
            err = open(log_err, "w", buffering=1)
            os.dup2(err.fileno(), sys.stderr.fileno())
    except OSError as exc:
        raise UsageError.from_oserror(exc, f"cannot open log file {exc.filename}") from None


def with_cc(command: list[str], params: dict, cc: str | None,
            set_env: bool = True) -> Iterator[tuple[list[str], dict]]:
    """(command, params) for each copy --cc asks for, made as they are taken: {cc}
    replaced by the copy's id in the command and in the path and name options,
    FLUXLITE_JOB_CC set (not for --bcc: set_env False); one unchanged pair without
    --cc.  A bad IDSET is refused at once."""
    if cc is None:
        return iter([(command, params)])
    try:
        ccs = sorted(idset.decode(cc))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--cc") from None
    if not ccs:
        raise click.BadParameter("empty idset", param_hint="--cc")
    return _copies(command, params, ccs, set_env)


def _copies(command: list[str], params: dict, ccs: list[int], set_env: bool):
    for i in ccs:
        def sub(text, i=str(i)):
            return _CC.sub(i, text) if isinstance(text, str) else text
        p = dict(params)
        for key in CC_OPTIONS:
            p[key] = sub(p.get(key))
        p["env_rules"] = tuple(sub(r) for r in params.get("env_rules") or ()) + \
            ((f"FLUXLITE_JOB_CC={i}",) if set_env else ())
        yield [sub(a) for a in command], p


# submit requests in flight at once: jobspecs are built, sent and counted in windows
SUBMIT_WINDOW = 256


def submit_all(specs: Iterable[dict], params: dict, *, quiet: bool, wait: bool, watch: bool,
               progress: bool, prog: str, urgencies: list[int] | None = None) -> int:
    """Submit the jobspecs (taken one at a time, at most SUBMIT_WINDOW unanswered),
    print their ids, and wait or watch as asked; the exit code.  Each job's urgency
    is params' unless `urgencies` gives one per jobspec.  Ctrl-C stops submitting at
    once: the requests already sent are answered, the count submitted is said, and
    the exit code is 130."""
    wait_event = params.get("wait_event")
    if wait_event == "clean":  # --wait is --wait-event=clean
        wait, wait_event = True, None
    if progress and not sys.stdout.isatty():  # as Flux: a bar is for a terminal
        print(f"{prog}: stdout is not a tty. Ignoring --progress option", file=sys.stderr)
        progress = False
    wait = wait or progress
    with handle() as h:
        # a job waited for is submitted waitable: not purged before its wait arrives
        flags = WAITABLE if wait else 0
        urg = iter(urgencies) if urgencies else itertools.repeat(params["urgency"])
        ids, refused = [], set()
        inflight: collections.deque = collections.deque()

        def settle() -> None:
            p = inflight.popleft()
            h.wait(p)
            resp = p.take()
            ids.append(resp["id"])
            if not quiet:
                click.echo(fluid.f58(resp["id"]))
            if "exception" in resp:
                ex = resp["exception"]
                print(f"{prog}: job {fluid.f58(resp['id'])}: {ex['note']}", file=sys.stderr)
                refused.add(resp["id"])
        if not _send_all(h, specs, urg, flags, inflight, settle):
            print(f"{prog}: interrupted: {len(ids)} job(s) submitted", file=sys.stderr)
            return 130
        rc = 1 if refused else 0   # a job refused at submit (its line is said)
        return max(rc, _afterwards(h, ids, params, refused, wait=wait, watch=watch,
                                   progress=progress, wait_event=wait_event, prog=prog))


def _send_all(h, specs, urgencies, flags, inflight, settle) -> bool:
    """Send each jobspec, settling the oldest answer while SUBMIT_WINDOW are in
    flight; False if Ctrl-C stopped it (nothing more is sent, the answers already
    due are awaited and counted; a second Ctrl-C leaves at once)."""
    from ..jobapi import api
    interrupted: list[bool] = []

    def on_sigint(signum, frame):
        if interrupted:
            raise KeyboardInterrupt
        interrupted.append(True)
    old = signal.signal(signal.SIGINT, on_sigint)
    try:
        for s in specs:
            if interrupted:
                break
            inflight.append(api.submit_async(h, s, next(urgencies), flags))
            if len(inflight) >= SUBMIT_WINDOW:
                settle()
        while inflight:
            settle()
    finally:
        signal.signal(signal.SIGINT, old)
    return not interrupted


def _afterwards(h, ids, params, refused, *, wait, watch, progress, wait_event, prog) -> int:
    """--watch, --wait (--progress) or --wait-event once every job is in; the exit code."""
    if watch:
        from .attach import Attach
        return max((Attach(h, jobid, label_io=params["label_io"], prog=prog).run()
                    for jobid in ids), default=0)
    if wait:
        return _wait_all(h, ids, progress, said=refused)
    if wait_event:
        _wait_event_all(h, ids, wait_event)
    return 0


def _wait_event_all(h, ids: list[int], name: str) -> None:
    """--wait-event NAME: until each job has had NAME (exec.NAME in its exec eventlog);
    a job that ends without it is an error naming it."""
    from ..errors import EndOfStream
    from ..jobapi import api
    path, event = ("exec", name[5:]) if name.startswith("exec.") else ("eventlog", name)
    for jobid in ids:
        for e in api.event_watch(h, jobid, path):
            if e["name"] == event:
                break
        else:
            raise EndOfStream(f"job {fluid.f58(jobid)} ended without event {name!r}")


def _wait_all(h, ids: list[int], progress: bool, said: set[int]) -> int:
    """Wait for the jobs; the largest exit code.  Each job that failed before it
    started gets one line saying why, unless its refusal at submit was `said`."""
    from ..jobapi import api
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
    from ..jobapi import api
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
