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

Critical ranks: doom follows `shell.critical-ranks`.  An exit or a lost shell
on a shell rank outside the job's critical set never starts the timer and
never triggers exit-on-error; it is recorded as `doom.ignore` in the exec
eventlog so the user can see what was ignored.
"""

from __future__ import annotations

import asyncio

from ...util import fsd
from .. import options as shell_options
from ..plugin import ShellPlugin

DEFAULT_TIMEOUT = 30.0


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

    def methods(self) -> dict:
        return {"doom": self._report} if self.shell.is_leader else {}

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
                "signaled": task.signaled, "exitcode": task.exitcode or 0,
                "disposition": task.disposition()}
        failed = info["exitcode"] != 0
        if self.shell.is_leader:
            self.check(info)
            return
        if not self.sent_first or (failed and not self.sent_error):
            self.shell.send_leader("doom", info)
            self.sent_first = True
            self.sent_error = self.sent_error or failed

    def _report(self, payload: dict, msg) -> None:
        self.check(payload)

    def shell_lost(self, shell_rank: int, severity: int, message: str) -> None:
        if severity == 0:
            # a critical shell was lost: job-exec has already raised the fatal exception
            self.shell_tasks_complete()
            return
        self.check({"shell_rank": shell_rank, "lost": True, "message": message,
                    "exitcode": 1, "rank": None})

    def shell_tasks_complete(self) -> None:
        self.done = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    # --------------------------------------------------------------- decision
    def check(self, info: dict) -> None:
        shell = self.shell
        sr = info["shell_rank"]
        lost = bool(info.get("lost"))
        if sr not in shell.critical_ranks:
            ctx = {"shell_rank": sr, "what": "lost shell" if lost else "task exit"}
            if not lost:
                ctx.update(rank=info["rank"], disposition=info.get("disposition", ""))
            shell.exec_event("doom.ignore", ctx)
            return
        if not self.recorded and not lost:
            self.recorded = True
            shell.exec_event("shell.task-exit", {
                "localid": info["localid"], "rank": info["rank"], "state": "Exited",
                "pid": info["pid"], "wait_status": info["wait_status"],
                "signaled": info["signaled"], "exitcode": info["exitcode"]})
        if self.done:
            return
        if self.exit_on_error and info["exitcode"] != 0:
            self._fatal(self._what(info, "failed") + " and exit-on-error is set")
            return
        if self.timeout is not None and self.timer is None and self.first is None:
            self.first = info
            self.timer = asyncio.get_running_loop().call_later(self.timeout, self._expired)

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
                    f" and exit-timeout={fsd.format(self.timeout)} has expired")

    def _fatal(self, note: str) -> None:
        self.done = True
        self.shell.log(f"doom: {note}", "FATAL")
        asyncio.ensure_future(self.shell.raise_exception("exec", 0, note))
