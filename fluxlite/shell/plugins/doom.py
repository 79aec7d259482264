"""doom: end a job whose tasks are not exiting together (exit-timeout, exit-on-error).

Options:
    exit-timeout=FSD|none   after the first task exits, the others have this long
                            (default 30s; batch/alloc jobs default to none)
    exit-on-error           fail the job as soon as a task exits nonzero or by a signal

Each shell reports its first task exit (and its first failing one) to the
leader once.  The leader records the first exit in the exec eventlog
(`shell.task-exit`), then starts the timer or, with exit-on-error and a
failure, raises the fatal `exec` exception at once.  A lost shell counts as
an abnormal exit of its tasks.  The timer stops when every task is complete.

Critical ranks: doom subscribes to `shell.critical-ranks`.  An exit or a lost
shell on a shell rank outside the job's critical set never starts the timer
and never triggers exit-on-error; it is recorded as `doom.ignore` in the exec
eventlog so the user can see what was ignored.  Every report is kept, so when
the set changes the decision is made again: a timer armed by a rank that is
no longer critical stops, and a report from a rank that became critical arms
it (for what is left of the timeout).

The fatal exception carries the failing task's wait status, and the job
finishes with that status (a task's `exit 7` ends the job with 7, not with
the SIGTERM its siblings got), as in Flux.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

import msgspec

from ...job import shell_options
from ...protocol.dispatch import handler
from ...protocol.schema import Meta, Rank, Struct, Text, WaitStatus
from ...util import fsd
from ..plugin import ShellPlugin

DEFAULT_TIMEOUT = 30.0


class DoomReport(Struct, kw_only=True):
    """A follower shell's report of a task exit (the `doom` method's payload)."""
    shell_rank: Rank
    host: Text = ""
    rank: Rank
    localid: Rank = 0
    pid: Annotated[int, Meta(ge=0, le=(1 << 31) - 1)] = 0
    wait_status: WaitStatus = 0
    signaled: Annotated[int, Meta(ge=0, le=64)] = 0   # the signal that ended the task, or 0
    exitcode: WaitStatus = 0
    disposition: Text = ""


class Doom(ShellPlugin):
    name = "doom"

    def __init__(self, shell):
        super().__init__(shell)
        self.timeout: float | None = DEFAULT_TIMEOUT
        self.exit_on_error = False
        self.sent_first = False
        self.sent_error = False
        self.recorded = False
        self.timer: asyncio.TimerHandle | None = None
        self.first: dict | None = None
        self.done = False
        self.reports: list[dict] = []   # leader: every report, in arrival order
        self.ignored: set[tuple] = set()  # reports already recorded as doom.ignore


    def shell_init(self) -> None:
        opts = self.shell.options
        value = opts.get("exit-timeout", DEFAULT_TIMEOUT)
        try:
            self.timeout = fsd.parse_timeout(value)
        except ValueError:
            raise ValueError("exit-timeout is not a valid Flux Standard Duration") from None
        self.exit_on_error = shell_options.flag(opts.get("exit-on-error", False))

    # ---------------------------------------------------------------- reports
    def task_exit(self, task) -> None:
        info = {"shell_rank": self.shell.rank, "host": self.shell.hostname,
                "rank": task.rank, "localid": task.localid,
                "pid": task.pid or 0, "wait_status": task.status or 0,
                "signaled": task.signaled or 0, "exitcode": task.exitcode or 0,
                "disposition": task.disposition()}
        failed = info["exitcode"] != 0
        if self.shell.is_leader:
            self.check(info)
            return
        if not self.sent_first or (failed and not self.sent_error):
            self.shell.send_leader("doom", info)
            self.sent_first = True
            self.sent_error = self.sent_error or failed

    @handler("doom", schema=DoomReport)
    def _report(self, msg, report: DoomReport) -> None:
        """Leader: a follower's first task exit (and its first failing one)."""
        if self.shell.is_leader:
            self.check(msgspec.structs.asdict(report))

    def shell_lost(self, shell_rank: int, severity: int, message: str) -> None:
        if severity == 0:
            # a critical shell was lost: job-exec has already raised the fatal exception
            self.shell_tasks_complete()
            return
        self.check({"shell_rank": shell_rank, "lost": True, "message": message,
                    "exitcode": 1, "wait_status": 1 << 8, "rank": None})

    def shell_critical_ranks(self, ranks: set, seq: int) -> None:
        """The critical set changed: decide again on everything reported so far."""
        if self.done or not self.shell.is_leader:
            return
        if self.first is not None and self.first["shell_rank"] not in ranks:
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            self.first = None
        for info in self.reports:
            if info["shell_rank"] not in ranks:
                self._ignore(info)
            else:
                self._decide(info)
                if self.done:
                    return

    def shell_tasks_complete(self) -> None:
        self.done = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    # --------------------------------------------------------------- decision
    def check(self, info: dict) -> None:
        """Leader: a shell reported a task exit, or a shell was lost."""
        info = dict(info, received=time.monotonic())
        self.reports.append(info)
        if info["shell_rank"] not in self.shell.critical_ranks:
            self._ignore(info)
            return
        self._decide(info)

    def _ignore(self, info: dict) -> None:
        key = (info["shell_rank"], info.get("rank"), bool(info.get("lost")))
        if key in self.ignored:
            return
        self.ignored.add(key)
        lost = bool(info.get("lost"))
        ctx = {"shell_rank": info["shell_rank"], "what": "lost shell" if lost else "task exit"}
        if not lost:
            ctx.update(rank=info["rank"], disposition=info.get("disposition", ""))
        self.shell.exec_event("doom.ignore", ctx)

    def _decide(self, info: dict) -> None:
        """A report from a critical rank: record it, then fail at once or arm the timer."""
        lost = bool(info.get("lost"))
        if not self.recorded and not lost:
            self.recorded = True
            self.shell.exec_event("shell.task-exit", {
                "localid": info["localid"], "rank": info["rank"], "state": "Exited",
                "pid": info["pid"], "wait_status": info["wait_status"],
                "signaled": info["signaled"], "exitcode": info["exitcode"]})
        if self.done:
            return
        if self.exit_on_error and info["exitcode"] != 0:
            self._fatal(self._what(info, "failed") + " and exit-on-error is set", info)
            return
        if self.timeout is not None and self.timer is None and self.first is None:
            self.first = info
            left = max(0.0, self.timeout - (time.monotonic() - info["received"]))
            self.timer = asyncio.get_running_loop().call_later(left, self._expired)

    def _what(self, info: dict, verb: str) -> str:
        host = info.get("host") or self.shell.hostname
        if info.get("lost"):
            return f"{self.shell.arg0}: shell rank {info['shell_rank']} on host {host} " \
                   f"was lost ({info.get('message') or 'lost shell'})"
        return (f"{self.shell.arg0}: task rank {info['rank']} on host {host} {verb} "
                f"({info.get('disposition') or 'Exit ' + str(info['exitcode'])})")

    def _expired(self) -> None:
        self.timer = None
        if self.done:
            return
        self._fatal(self._what(self.first, "exited") +
                    f" and exit-timeout={fsd.format(self.timeout)} has expired", self.first)

    def _fatal(self, note: str, info: dict) -> None:
        self.done = True
        self.shell.log(f"doom: {note}", "FATAL")
        ctx = {"shell_rank": info["shell_rank"], "host": info.get("host") or self.shell.hostname}
        if info.get("rank") is not None:
            ctx["rank"] = info["rank"]
        self.shell.spawn(self.shell.raise_exception(
            "exec", 0, note, ctx, wait_status=info.get("wait_status", 0)))
