"""Exceptions and signals for jobs: `fluxlite cancel`, and `fluxlite job raise`,
`raiseall`, `kill` and `killall` (flux-job(1), flux-cancel(1)).

`raise` and `kill` take several job ids, as Flux's (a message after the ids, or
--message); `raiseall` and `killall` only count the matching jobs unless -f
confirms, and say so in Flux's words.
"""

from __future__ import annotations

import os
import signal
import sys

import click

from ..errors import FluxliteError, UsageError
from .common import HELP, JOBID, handle, parse_jobid


def _signum(text: str) -> int:
    t = text.upper()
    if t.isdigit():
        return int(t)
    name = t if t.startswith("SIG") else "SIG" + t
    try:
        return int(signal.Signals[name])
    except KeyError:
        raise UsageError(f"invalid signal {text!r}: expected a number or a name like "
                         "SIGTERM, TERM, USR1") from None


def _userid(user: str | None) -> int | None:
    """-u USER (checked by _cancel_user): None for all, the caller without it."""
    if user is None:
        return os.getuid()
    if user == "all":
        return None
    import pwd
    return int(user) if user.isdigit() else pwd.getpwnam(user).pw_uid


def _cancel_user(ctx, param, value):
    """--user: a name or uid, or `all`."""
    if value is None or value == "all" or value.isdigit():
        return value
    import pwd
    try:
        pwd.getpwnam(value)
    except KeyError:
        raise click.BadParameter(f"invalid user {value!r}") from None
    return value


CANCEL_STATES = ("depend", "priority", "sched", "run", "pending", "running", "active")


def _cancel_states(ctx, param, values):
    words = [w.strip().lower() for v in values for w in v.split(",")]
    if "inactive" in words:
        raise click.BadParameter("Exceptions cannot be raised on inactive jobs")
    bad = [w for w in words if w not in CANCEL_STATES]
    if bad:
        raise click.BadParameter(f"invalid state {bad[0]!r}: expected some of "
                                 f"{','.join(CANCEL_STATES)}")
    return words


def _jobs(n: int) -> str:
    return f"{n} job{'s' if n != 1 else ''}"


@click.command(context_settings=HELP)
@click.option("--all", "all_", is_flag=True,
              help="Cancel all your active jobs (with --user, that user's).")
@click.option("-u", "--user", default=None, callback=_cancel_user, metavar="USER|all",
              help="Cancel this user's jobs, or all users' (instance owner only); "
                   "implies --all.")
@click.option("-S", "--states", "--state", "states", multiple=True, callback=_cancel_states,
              metavar="STATES", help="Only jobs in these states: depend, priority, sched, "
                                     "run, pending, running, active (default); implies --all.")
@click.option("-n", "--dry-run", is_flag=True, help="Only say how many jobs would be canceled.")
@click.option("-m", "--message", default="", help="Note recorded with the cancel exception.")
@click.option("-q", "--quiet", is_flag=True, help="Say nothing when no job matches.")
@click.argument("jobids", type=JOBID, nargs=-1)
def cancel(all_, user, states, dry_run, message, quiet, jobids):
    """Cancel jobs: pending ones never run, running ones get SIGTERM then SIGKILL.

    With --all, --user or --states, cancel every matching job and say how many:
    "Canceled 3 jobs (0 errors)"."""
    from ..jobapi import api
    prog = "fluxlite cancel"
    all_ = all_ or user is not None or bool(states)
    if jobids and all_:
        raise UsageError("do not give JOBIDs with --all, --user or --states")
    if not jobids and not all_:
        raise UsageError("give one or more JOBIDs, or --all")
    if not all_:
        if dry_run:
            print(f"{prog}: Would cancel {_jobs(len(jobids))}", file=sys.stderr)
            return 0
        errors = 0
        with handle() as h:
            for i in jobids:
                try:
                    api.cancel(h, i, message)
                except FluxliteError as exc:
                    print(f"{prog}: {exc.message}", file=sys.stderr)
                    errors += 1
        sys.exit(1 if errors else 0)
    with handle() as h:
        r = api.raise_all(h, userid=_userid(user), states=list(states) or ["active"],
                          note=message, dry_run=dry_run)
    count, errors = r["count"], r["errors"]
    if count:
        if dry_run:
            print(f"{prog}: Would cancel {_jobs(count)}", file=sys.stderr)
        else:
            print(f"{prog}: Canceled {_jobs(count)} ({errors} error{'s' if errors != 1 else ''})",
                  file=sys.stderr)
    elif not quiet:
        print(f"{prog}: Matched 0 jobs", file=sys.stderr)
    sys.exit(1 if errors else 0)


def _ids_and_note(words: tuple[str, ...], message: str | None) -> tuple[list, str]:
    """Flux's `raise ID... [--] [NOTE...]`: job ids up to the first word that is not
    one, then the note (or --message, not both)."""
    ids = []
    words = list(words)
    while words:
        try:
            ids.append((words[0], parse_jobid(words[0])))
        except UsageError:
            break
        words.pop(0)
    if words and words[0] == "--":
        words.pop(0)
    if not ids:
        raise UsageError("give one or more JOBIDs")
    if words and message is not None:
        raise UsageError("Do not set note on command line and with --message")
    return ids, " ".join(words) if words else (message or "")


def _each(ids: list, verb: str, call) -> None:
    """call(h, jobid) for each job; one line per failure ("raise ID: why"), exit 1."""
    failed = False
    with handle() as h:
        for text, jobid in ids:
            try:
                call(h, jobid)
            except FluxliteError as exc:
                print(f"fluxlite job: {verb} {text}: {exc.message}", file=sys.stderr)
                failed = True
    if failed:
        sys.exit(1)


@click.command("raise", context_settings=dict(HELP, ignore_unknown_options=True))
@click.option("-s", "--severity", type=click.IntRange(0, 7), default=0, show_default=True,
              help="0 is fatal; larger values are recorded only.")
@click.option("-t", "--type", "etype", default="cancel", show_default=True)
@click.option("-m", "--message", default=None, metavar="NOTE",
              help="The exception's note (or give it after the job ids).")
@click.argument("words", nargs=-1, metavar="JOBID... [--] [NOTE...]")
def raise_(severity, etype, message, words):
    """Raise an exception on jobs."""
    from ..jobapi import api
    ids, note = _ids_and_note(words, message)
    _each(ids, "raise", lambda h, i: api.raise_exception(h, i, etype, severity, note))


@click.command(context_settings=HELP)
@click.option("-s", "--signal", "sig", default="SIGTERM", show_default=True,
              help="Signal name or number.")
@click.argument("jobids", nargs=-1, required=True)
def kill(sig, jobids):
    """Send a signal to running jobs' tasks."""
    from ..jobapi import api
    signum = _signum(sig)
    ids = []
    for text in jobids:
        try:
            ids.append((text, parse_jobid(text)))
        except UsageError:
            raise UsageError(f"invalid jobid: {text}") from None
    _each(ids, "kill", lambda h, i: api.kill(h, i, signum))


def _bulk_report(count: int, dry_run: bool, done: str) -> None:
    prog = "fluxlite job"
    if count and dry_run:
        print(f"{prog}: Command matched {count} jobs (-f to confirm)", file=sys.stderr)
    elif count:
        print(f"{prog}: {done}", file=sys.stderr)
    else:
        print(f"{prog}: Command matched 0 jobs", file=sys.stderr)


@click.command(context_settings=HELP)
@click.option("-s", "--severity", type=click.IntRange(0, 7), default=7, show_default=True,
              help="0 is fatal; larger values are recorded only.")
@click.option("-u", "--user", default=None, callback=_cancel_user, metavar="USER|all",
              help="This user's jobs (default yours), or all users' (instance owner only).")
@click.option("-S", "--states", "states", multiple=True, callback=_cancel_states,
              metavar="STATES", help="Only jobs in these states (default: active).")
@click.option("-f", "--force", is_flag=True, help="Confirm (without it, only count).")
@click.argument("etype", metavar="TYPE")
@click.argument("note", nargs=-1)
def raiseall(severity, user, states, force, etype, note):
    """Raise an exception of TYPE on every matching job."""
    from ..jobapi import api
    with handle() as h:
        r = api.raise_all(h, userid=_userid(user), states=list(states) or ["active"],
                          etype=etype, severity=severity, note=" ".join(note),
                          dry_run=not force)
    _bulk_report(r["count"], not force,
                 f"Raised exception on {r['count']} jobs ({r['errors']} errors)")


@click.command(context_settings=HELP)
@click.option("-u", "--user", default=None, callback=_cancel_user, metavar="USER|all",
              help="This user's jobs (default yours), or all users' (instance owner only).")
@click.option("-f", "--force", is_flag=True, help="Confirm (without it, only count).")
@click.option("-s", "--signal", "sig", default="SIGTERM", show_default=True,
              help="Signal name or number.")
def killall(user, force, sig):
    """Send a signal to every running job of a user."""
    from ..job import states as st
    from ..jobapi import api
    signum = _signum(sig)
    errors = 0
    with handle() as h:
        running = [j["id"] for j in api.list_jobs(h, "active", userid=_userid(user))
                   if j["state"] in st.RUNNING]
        for jobid in running if force else ():
            try:
                api.kill(h, jobid, signum)
            except FluxliteError:
                errors += 1
    _bulk_report(len(running), not force,
                 f"{signal.strsignal(signum)} {len(running)} jobs ({errors} errors)")


COMMANDS = (raise_, raiseall, kill, killall)
