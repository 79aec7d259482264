"""`fluxlite job ...`: eventlog, wait-event, attach, wait, status, last, info, urgency,
purge, id (raise, kill and the bulk ones are in jobcontrol.py, the tools in
jobtools.py)."""

from __future__ import annotations

import json
import sys

import click

from ..errors import EndOfStream, NotFound, UsageError
from .common import HELP, JOB_JOBID, fsd_timeout, handle, parse_jobid

PATHS = ("eventlog", "exec", "output", "guest.exec.eventlog", "guest.output")


def _path(p: str) -> str:
    return {"guest.exec.eventlog": "exec", "guest.output": "output"}.get(p, p)




@click.group(context_settings=HELP)
def job():
    """Job utilities: eventlog, wait-event, attach, wait, status, last, info, raise,
    raiseall, urgency, kill, killall, purge, id, submit, taskmap, timeleft, hostpids,
    memo, namespace."""


def _printer(fmt: str, time_format: str | None, human: bool):
    """How `job eventlog` and `wait-event` print an entry, as Flux's: -f text (the
    time as -T says, human with -H) or json, one compact object a line."""
    from ..job.eventlog import TimeFormat, format_entry
    if fmt == "json":
        return lambda e: click.echo(json.dumps(e, separators=(",", ":"), ensure_ascii=False))
    clock = TimeFormat("human" if human else (time_format or "raw"))
    return lambda e: click.echo(format_entry(e, stamp=clock(e.get("timestamp", 0.0))))


class _EventlogCommand(click.Command):
    """A bare -L is --color=always, as Flux's (its WHEN only joined to it: -Lnever), so
    the word after it stays the job id."""

    def parse_args(self, ctx, args):
        return super().parse_args(ctx, ["--color=always" if a == "-L" else a for a in args])


def _event_print_options(f):
    """-f/--format, -T/--time-format, -H/--human and -L/--color, as Flux's."""
    from .eventprint import color_when
    for opt in reversed([
        click.option("-f", "--format", "fmt", type=click.Choice(["text", "json"]),
                     default="text", show_default=True, help="Entries as text or JSON."),
        click.option("-T", "--time-format", type=click.Choice(TIME_FORMATS), default=None,
                     help="Times: raw (seconds), iso, offset (from the first entry) or "
                          "human."),
        click.option("-H", "--human", is_flag=True,
                     help="Human times: the date at each new minute, then offsets."),
        click.option("-L", "--color", is_flag=False, flag_value="always", default=None,
                     callback=color_when, metavar="WHEN",
                     help="always, never or auto: accepted, not colored."),
    ]):
        f = opt(f)
    return f


TIME_FORMATS = ("raw", "iso", "offset", "human")


@job.command(cls=_EventlogCommand, context_settings=HELP)
@click.option("-p", "--path", type=click.Choice(PATHS), default="eventlog",
              show_default=True, help="Which eventlog: the main one, exec or output.")
@click.option("-F", "--follow", "-w", "--watch", "follow", is_flag=True,
              help="Keep printing entries as they are appended until the log is complete.")
@_event_print_options
@click.argument("jobid", type=JOB_JOBID)
def eventlog(path, follow, fmt, time_format, human, color, jobid):
    """Print a job's eventlog."""
    from ..jobapi import api
    show = _printer(fmt, time_format, human)
    with handle() as h:
        api.info(h, jobid)  # a clear error for an unknown job
        for e in api.event_watch(h, jobid, _path(path), follow=follow):
            show(e)


@job.command("wait-event", cls=_EventlogCommand, context_settings=HELP)
@click.option("-p", "--path", type=click.Choice(PATHS), default="eventlog", show_default=True)
@click.option("-t", "--timeout", callback=fsd_timeout, default=None, metavar="FSD",
              help="Give up after this long: a Flux Standard Duration such as 0.5s, 10, "
                   "2m or none.")
@click.option("-q", "--quiet", is_flag=True, help="Do not print the event.")
@click.option("-v", "--verbose", is_flag=True, help="Print the entries before it too.")
@click.option("-c", "--count", type=click.IntRange(min=1), default=1, show_default=True,
              help="Wait for this many matching entries.")
@click.option("-W", "--waitcreate", is_flag=True,
              help="Wait for the eventlog to be created (what a watch does anyway).")
@click.option("-m", "--match-context", "matches", multiple=True, metavar="KEY=VAL",
              help="Only an event whose context has KEY equal to VAL (repeatable).")
@_event_print_options
@click.argument("jobid", type=JOB_JOBID)
@click.argument("name")
def wait_event(path, timeout, quiet, verbose, count, waitcreate, matches, fmt, time_format,
               human, color, jobid, name):
    """Wait until event NAME appears in a job's eventlog (it may be there already)."""
    from ..errors import RPCTimeout
    from ..jobapi import api
    want = {}
    for m in matches:
        k, sep, v = m.partition("=")
        if not sep:
            raise UsageError(f"--match-context expects KEY=VAL, got {m!r}")
        try:
            want[k] = json.loads(v)
        except ValueError:
            want[k] = v
    show = _printer(fmt, time_format, human)
    log = "the eventlog" if _path(path) == "eventlog" else f"the {_path(path)} eventlog"
    with handle() as h:
        api.info(h, jobid)
        try:
            for e in api.event_watch(h, jobid, _path(path), timeout=timeout):
                ctx = e.get("context") or {}
                if e.get("name") == name and all(ctx.get(k) == v for k, v in want.items()):
                    count -= 1
                if count == 0:
                    if not quiet:
                        show(e)
                    return 0
                if verbose:
                    show(e)
        except RPCTimeout:
            raise RPCTimeout(f"wait-event timeout on event '{name}'") from None
        except NotFound as exc:
            raise NotFound(f"event '{name}' never appeared: {exc.message}") from None
    raise EndOfStream(f"event '{name}' never appeared: {log} is complete")


class _AttachCommand(click.Command):
    """attach's --tail takes its NUM only as --tail=NUM, as Flux's (a bare --tail is 10
    lines, and the word after it is the job id)."""

    def parse_args(self, ctx, args):
        return super().parse_args(ctx, ["--tail=10" if a == "--tail" else a for a in args])


@job.command(cls=_AttachCommand, context_settings=HELP)
@click.option("-l", "--label-io", is_flag=True, help="Prefix output lines with the task rank.")
@click.option("-u", "--unbuffered", is_flag=True,
              help="Send stdin as it comes (it always is here).")
@click.option("-i", "--stdin-ranks", default=None, metavar="RANKS",
              help="Send stdin to these task ranks only: all (the default), or give the "
                   "ranks at submit (run --input=RANKS).")
@click.option("--tail", type=click.IntRange(0), default=None, metavar="[=NUM]",
              help="Only the last NUM lines of output so far (default 10), then what "
                   "comes.")
@click.option("--read-only", is_flag=True, help="Send no stdin and catch no signals.")
@click.option("-v", "--verbose", count=True, help="Accepted (more detail: -E, -X).")
@click.option("-w", "--wait-event", default=None, metavar="EVENT",
              help="Stop following at EVENT of the job's eventlog (default: its end).")
@click.option("-E", "--show-events", is_flag=True, help="The job's events on stderr.")
@click.option("-X", "--show-exec", is_flag=True, help="Its exec events on stderr.")
@click.option("--show-status", is_flag=True,
              help="Accepted (fluxlite shows no status line).")
@click.option("--debug", is_flag=True, help="Accepted (no parallel debugger support).")
@click.argument("jobid", type=JOB_JOBID)
def attach(jobid, **opts):
    """Show a job's output (replayed if it already ran) and exit with its exit code.

    Standard input, when it is a pipe or a file, goes to the job's tasks (those of a
    job submitted without --input, or of a `run` reading its own stdin).  A running
    job with an interactive pty (-o pty.interactive) gets your terminal: what you type
    goes to it, its screen and window size are yours, until it closes; --read-only
    shows its screen only."""
    from ..jobapi import api
    from .attach import Attach, stdin_has_data
    from .pty import attach_pty, interactive_pty
    if opts["stdin_ranks"] not in (None, "all"):
        raise UsageError(f"--stdin-ranks={opts['stdin_ranks']}: fluxlite's attach sends "
                         "stdin to every task reading it; give the ranks at submit "
                         "(run --input=RANKS)")
    with handle() as h:
        state = api.info(h, jobid)["state"]
        if state != "INACTIVE" and interactive_pty(h, jobid):
            # our terminal on the job's (Flux's pty attach), or its output alone
            sys.exit(attach_pty(h, jobid, prog="fluxlite job attach",
                                read_only=opts["read_only"]))
        attach = Attach(h, jobid, label_io=opts["label_io"], prog="fluxlite job attach",
                        wait_event=opts["wait_event"])
        attach.show_events, attach.show_exec = opts["show_events"], opts["show_exec"]
        attach.read_only = opts["read_only"]
        if opts["tail"] is not None:
            attach.skip_lines = max(0, _output_lines(h, jobid) - opts["tail"])
        if not opts["read_only"] and stdin_has_data() and state != "INACTIVE":
            _stdin_target(h, jobid, attach)
        code = attach.run()
    sys.exit(code)


def _output_lines(h, jobid: int) -> int:
    """How many lines of output (stdout and stderr) the job has written so far."""
    from ..job import eventlog as jel
    from ..jobapi import api
    try:
        entries = list(api.event_watch(h, jobid, "output", follow=False))
    except NotFound:
        return 0
    return sum(jel.decode_data(e["context"]).count(b"\n") for e in entries
               if e.get("name") == "data" and "data" in (e.get("context") or {}))


def _stdin_target(h, jobid: int, attach) -> None:
    """Where the job reads stdin from: its input log (run's) or its shell's `stdin`
    method (submit's, Flux's service); neither: it reads none."""
    from ..jobapi import api
    opts = api.job_data(h, jobid, "jobspec")["attributes"]["system"].get(
        "shell", {}).get("options", {})
    if opts.get("input") and not opts.get("input.path"):
        attach.forward_stdin = True
    elif opts.get("input.stdin.type") == "service":
        try:
            for e in api.event_watch(h, jobid, "exec"):
                if e["name"] == "shell.init":
                    ctx = e.get("context") or {}
                    attach.stdin_service = (ctx["service"], ctx["leader-rank"])
                    attach.forward_stdin = True
                    return
        except NotFound:  # it ended before it started: nothing reads stdin
            return


@job.command(context_settings=HELP)
@click.option("-a", "--all", "all_", is_flag=True,
              help="Wait for every job not waited for yet, finished or not.")
@click.option("-v", "--verbose", is_flag=True, help="Print a line for each job.")
@click.argument("jobid", type=JOB_JOBID, required=False)
def wait(all_, verbose, jobid):
    """Wait for a job to finish; exit 1 if it failed (its error on stderr).

    With no JOBID, wait for the next job to finish among those not waited for
    yet (one that already finished comes first), print its id and exit as
    `job wait JOBID` would; exit 2 if there are none.  With --all, wait for
    every job not waited for yet, saying `ID: ERROR` for each that failed (and
    with -v `ID: job completed successfully` for the others); exit 1 if any
    failed.
    """
    from ..jobapi import api
    from ..util import fluid
    if jobid is not None and all_:
        raise click.UsageError("give one JOBID or --all, not both")
    with handle() as h:
        if all_:  # every job not waited for yet, finished or not (as Flux reaps them)
            results = api.wait_many(h, [j["id"] for j in api.list_jobs(h, "all")
                                        if not j["waited"]])
        elif jobid is None:
            r = api.wait_any(h)
            click.echo(fluid.f58(r["id"]))
            results = [r]
        else:
            results = [api.wait(h, jobid)]
        failed = 0
        for r in results:  # as Flux's: --all names each job, one job's error is bare
            if not r["success"]:
                failed += 1
                print(f"{fluid.f58(r['id'])}: {r['errstr']}" if all_ else
                      f"fluxlite job wait: {r['errstr']}", file=sys.stderr)
            elif verbose and all_:
                print(f"{fluid.f58(r['id'])}: job completed successfully", file=sys.stderr)
    sys.exit(1 if failed else 0)


@job.command(context_settings=HELP)
@click.option("-v", "--verbose", count=True,
              help="Say why each job that did not succeed ended (-vv: every job).")
@click.option("-e", "--exception-exit-code", "exc_code", type=click.IntRange(0, 255),
              default=1, show_default=True, metavar="N",
              help="Exit code of a job ended only by an exception (canceled while "
                   "pending, refused by the scheduler).")
@click.option("-j", "--json", "as_json", is_flag=True, help="Print each job's result as JSON.")
@click.argument("jobids", type=JOB_JOBID, nargs=-1, required=True)
def status(verbose, exc_code, as_json, jobids):
    """Wait for jobs to end and exit with the largest of their exit codes, as a shell
    would: 128+N for a job whose tasks died by signal N.  It does not count as
    waiting for them (`job wait` still may)."""
    import os

    from ..jobapi import api
    from ..util import fluid
    prog = "fluxlite job status"
    if verbose and len(jobids) > 1:
        print(f"{prog}: fetching status for {len(jobids)} jobs", file=sys.stderr)
    with handle() as h:
        infos = []
        for i in jobids:
            for _ in api.event_watch(h, i):  # to the end of its main log (`clean`)
                pass
            infos.append(api.info(h, i))
    if verbose and len(jobids) > 1:
        print(f"{prog}: all done.", file=sys.stderr)
    code = 0
    for i, info in zip(jobids, infos):
        status = info.get("waitstatus")
        ex = info.get("exception") or {}
        if as_json:
            click.echo(_result_json(i, info, status, ex))
        exitcode = 0
        if status is not None:
            exitcode = (128 + os.WTERMSIG(status) if os.WIFSIGNALED(status)
                        else os.WEXITSTATUS(status))
        fatal = bool(ex.get("occurred")) and ex.get("severity") == 0
        code = max(code, exitcode, exc_code if fatal else 0)
        if not verbose:
            continue
        if status is not None and os.WIFSIGNALED(status):
            line = f"job shell died by signal {os.WTERMSIG(status)}"
        elif verbose > 1 or exitcode != 0 or fatal:
            line = (f"exception type={ex['type']}" if fatal
                    else f"exited with exit code {exitcode}")
        else:
            continue
        print(f"{prog}: {fluid.f58(i)}: {line}", file=sys.stderr)
    sys.exit(code)


def _last_slice(text: str | None) -> slice:
    """`job last` argument: N (the N newest) or a Python slice such as [:5] or [::-1]."""
    if text is None:
        return slice(0, 1)
    if text.isdigit() and int(text) > 0:
        return slice(0, int(text))
    t = text.strip()
    if t.startswith("[") and t.endswith("]"):
        parts = t[1:-1].split(":")
        try:
            if 1 < len(parts) <= 3:
                return slice(*[int(p) if p.strip() else None for p in parts])
        except ValueError:
            pass
    raise click.BadParameter(f"{text!r}: expected a positive count N or a slice such as "
                             "'[:5]' or '[::-1]'", param_hint="N|SLICE")


@job.command(context_settings=HELP)
@click.argument("which", metavar="[N|SLICE]", required=False)
def last(which):
    """Print the ids of the jobs you submitted last, newest first: one, the N newest,
    or a Python slice of that list ('[:]' all, '[::-1]' all in submit order)."""
    from ..jobapi import api
    from ..util import fluid
    sl = _last_slice(which)
    if sl.step == 0:
        raise click.BadParameter(f"{which!r}: a slice step cannot be zero",
                                 param_hint="N|SLICE")
    with handle() as h:
        ids = api.history(h)
    if not ids:
        raise NotFound("job history is empty")
    chosen = ids[sl]
    if chosen:
        click.echo("\n".join(fluid.f58(i) for i in chosen))


INFO_KEYS = ("jobspec", "R", "J", "eventlog", "guest.exec.eventlog", "guest.input",
             "guest.output")


@job.command(context_settings=HELP)
@click.option("-o", "--original", is_flag=True,
              help="With jobspec: as submitted (here the same: nothing changes it).")
@click.option("-b", "--base", is_flag=True,
              help="With jobspec or R: before updates (here the same: none are made).")
@click.argument("jobid", type=JOB_JOBID)
@click.argument("key", required=False)
def info(original, base, jobid, key):
    """Print a job's KEY as JSON: jobspec, R, J (the jobspec: fluxlite signs none),
    eventlog, guest.exec.eventlog, guest.input, guest.output, or any other key in
    the job's KVS directory."""
    from ..job import states
    from ..jobapi import api
    from ..util import fluid
    del original, base
    if key is None:  # click's own message lists the choices on tab-indented lines
        raise click.UsageError(f"Missing argument 'KEY': one of {', '.join(INFO_KEYS)}, "
                               "or another key of the job")
    with handle() as h:
        state = api.info(h, jobid)["state"]
        try:
            value = api.job_data(h, jobid, "jobspec" if key == "J" else key)
        except NotFound:
            yet = "" if state == states.INACTIVE else " yet"
            raise NotFound(f"job {fluid.f58(jobid)} has no {key}{yet}") from None
    from .common import echo_value
    if isinstance(value, dict):  # jobspec, R: one compact line, as Flux stores them
        click.echo(json.dumps(value, separators=(",", ":"), ensure_ascii=False))
    else:
        echo_value(value)


@job.command("urgency", context_settings=HELP)
@click.option("-v", "--verbose", is_flag=True, help="Say what the urgency was.")
@click.argument("jobid", type=JOB_JOBID)
@click.argument("urgency", metavar="N|hold|expedite|default")
def urgency_(verbose, jobid, urgency):
    """Change a pending job's urgency: 0 or hold holds it, a larger one releases it,
    31 or expedite runs it before all others (16 is the default)."""
    from ..job.depend import parse_urgency
    from ..jobapi import api
    from ..util import fluid
    value = parse_urgency(urgency)
    with handle() as h:
        old = api.urgency(h, jobid, value)
    if verbose:
        click.echo(f"{fluid.f58(jobid)}: urgency changed from {old} to {value}")


RESULT_CODES = {"COMPLETED": 1, "FAILED": 2, "CANCELED": 4, "TIMEOUT": 8}  # Flux's enum


def _result_json(jobid: int, info: dict, status, ex: dict) -> str:
    """`job status -j`: Flux's result object, compact, its keys in the order Flux's
    reading of the eventlog adds them, `result` Flux's number (1 completed, 2 failed,
    4 canceled, 8 timeout)."""
    out = {"id": jobid, "exception_occurred": False}
    for key in ("t_submit", "t_run"):
        if info.get(key):
            out[key] = info[key]
    if ex.get("occurred"):
        out.update(exception_occurred=True, exception_type=ex.get("type"),
                   exception_note=ex.get("note", ""),
                   exception_severity=ex.get("severity"))
    if info.get("t_cleanup"):
        out["t_cleanup"] = info["t_cleanup"]
    if status is not None:
        out["waitstatus"] = status
    out["result"] = RESULT_CODES.get(info.get("result"), 0)
    return json.dumps(out, separators=(",", ":"), ensure_ascii=False)


@job.command(context_settings=HELP)
@click.option("--age-limit", metavar="FSD", default=None,
              help="Purge jobs that became inactive longer ago than FSD.")
@click.option("--num-limit", metavar="COUNT", type=click.IntRange(min=0), default=None,
              help="Purge the oldest inactive jobs until COUNT are left.")
@click.option("-f", "--force", is_flag=True, help="Perform the irreversible purge.")
@click.option("--batch", metavar="COUNT", type=click.IntRange(min=1), default=None,
              help="Jobs a request (Flux's): accepted, ids are purged in one request.")
@click.argument("jobids", type=JOB_JOBID, nargs=-1)
def purge(age_limit, num_limit, force, batch, jobids):
    """Purge inactive jobs: forget them and their data (eventlogs, output).

    Without --force, only say how many would go.  With JOBIDS, purge those
    inactive jobs instead of applying limits.
    """
    from ..jobapi import api
    from ..util import fsd
    if jobids and (age_limit is not None or num_limit is not None):
        raise click.UsageError("give JOBIDS or --age-limit/--num-limit, not both")
    age = -1.0
    if age_limit is not None:
        try:
            age = fsd.parse(age_limit)
        except fsd.FSDError as exc:
            raise click.BadParameter(str(exc), param_hint="'--age-limit'") from None
    with handle() as h:
        r = api.purge(h, age_limit=age, num_limit=-1 if num_limit is None else num_limit,
                      force=force, ids=list(jobids) if jobids else None)
    if force:
        click.echo(f"purged {r['count']} inactive jobs, {r['inactive']} remaining")
    else:
        click.echo(f"use --force to purge {r['count']} of {r['inactive']} inactive jobs")


@job.command("id", context_settings=HELP)
@click.option("-t", "--to", type=click.Choice(["dec", "f58", "f58plain", "hex", "dothex", "kvs",
                                               "words", "emoji"]),
              default="dec", show_default=True)
@click.argument("jobids", nargs=-1, required=False)
def id_(to, jobids):
    """Convert job ids between forms (decimal, F58, hex, dotted hex, KVS path, mnemonic
    words, emoji); with no JOBIDS, read them from stdin, one a line."""
    from ..util import fluid
    if not jobids:
        import sys as _sys
        jobids = tuple(line.strip() for line in _sys.stdin if line.strip())
    encode = {"dec": str, "f58": fluid.f58, "f58plain": fluid.f58_plain, "hex": hex,
              "dothex": fluid.dothex, "kvs": lambda i: f"job.{fluid.dothex(i)}",
              "words": fluid.words, "emoji": fluid.emoji}[to]
    for text in jobids:
        click.echo(encode(parse_jobid(text)))


from .jobcontrol import COMMANDS as _CONTROL  # noqa: E402  (raise, kill, ...)
from .jobtools import COMMANDS as _MORE  # noqa: E402  (submit, taskmap, timeleft, ...)

for _command in _CONTROL + _MORE:
    job.add_command(_command)
