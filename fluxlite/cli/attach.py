"""Following a job from the terminal: its output as it comes, its exceptions, its end.

Used by `run`, `submit --watch` and `job attach`.  Output and the main eventlog
are followed at once (the output watch is sent first); the job is over at
`clean`, and since both streams come from one KVS over one connection, in
commit order, all output has arrived by then.  Ctrl-C as Flux's attach: the
first keeps the job (nothing is sent to it) and says what comes next; a second
within 2 s cancels it; Ctrl-Z within 2 s of the first detaches (the job runs on,
the command exits 0).
The exit code follows Flux: the largest task exit code (128+signal), or 1
when a fatal exception ended a job whose tasks exited 0.
"""

from __future__ import annotations

import os
import signal
import stat
import sys
import time

from ..job import eventlog as jel
from ..job import states
from ..jobapi import api
from ..util import fluid


class Attach:
    def __init__(self, h, jobid: int, *, label_io: bool = False, prog: str = "fluxlite run",
                 quiet_exceptions: bool = False, verbose: int = 0,
                 wait_event: str | None = None):
        self.h = h
        self.jobid = jobid
        self.label_io = label_io
        self.prog = prog
        self.quiet_exceptions = quiet_exceptions
        self.t0: float | None = None
        self.status: int | None = None
        self.fatal = False
        self.lines = jel.LineBuffer()   # -l: whole lines per (stream, rank)
        self.forward_stdin = False  # forward our stdin into the job's input log
        self.stdin_service: tuple[str, int] | None = None  # or to the leader's `stdin`
        self.last_interrupt = -10.0
        self.verbose = verbose          # 2: the job's events as they come (-vv), 3: and
                                        # its exec events (-vvv), as Flux's run
        self.wait_event = wait_event    # stop following at this main eventlog event
        self.seen_event = False
        self.detached = False
        self.show_events = verbose >= 2  # job attach -E / -X set these apart
        self.show_exec = verbose >= 3
        self.read_only = False           # job attach --read-only: no stdin, no signals
        self.skip_lines = 0              # job attach --tail: output lines left out
        self.held: list[dict] | None = []  # output entries that came before `submit`

    # ---------------------------------------------------------------- output
    def _write(self, stream: str, rank: str, data: bytes, eof: bool = False) -> None:
        out = (sys.stdout if stream == "stdout" else sys.stderr).buffer
        if self.skip_lines:
            data = self._skip(data)
        if not self.label_io:
            out.write(data)
            out.flush()
            return
        out.write(jel.label_lines(f"{rank}: ", self.lines.take((stream, rank), data, eof)))
        out.flush()

    def _skip(self, data: bytes) -> bytes:
        """--tail: what is left of `data` once the lines still to skip are dropped."""
        while self.skip_lines and data:
            nl = data.find(b"\n")
            if nl < 0:
                return b""
            data = data[nl + 1:]
            self.skip_lines -= 1
        return data

    def _on_output(self, e: dict) -> None:
        if self.held is not None:  # the output log can answer first: hold it until the
            self.held.append(e)    # submit time is known, which stamps its log lines
            return
        self._show_output(e)

    def _show_output(self, e: dict) -> None:
        ctx = e.get("context") or {}
        name = e.get("name")
        if name == "data":
            data = jel.decode_data(ctx) if "data" in ctx else b""
            if data or (ctx.get("eof") and self.label_io):
                self._write(ctx["stream"], ctx.get("rank", "0"), data,
                            bool(ctx.get("eof")))
        elif name == "log":
            sys.stderr.write(f"{self._stamp(e)}fluxlite-shell[{ctx.get('rank', 0)}]: "
                             f"{ctx.get('level', 'INFO')}: {ctx.get('message', '')}\n")
            sys.stderr.flush()

    def _stamp(self, e: dict) -> str:
        if self.t0 is None:
            return ""
        return f"{e.get('timestamp', self.t0) - self.t0:.3f}s: "

    def _event_line(self, log: str, e: dict) -> None:
        """-vv/-vvv: one event on stderr, `0.012s: job.alloc` or `exec.shell.start {...}`."""
        import json
        ctx = e.get("context") or {}
        detail = f" {json.dumps(ctx, separators=(',', ':'))}" if ctx else ""
        sys.stderr.write(f"{self._stamp(e)}{log}.{e.get('name')}{detail}\n")
        sys.stderr.flush()

    def _on_main(self, e: dict) -> None:
        name = e.get("name")
        ctx = e.get("context") or {}
        if name == "submit":
            self.t0 = e.get("timestamp")
            held, self.held = self.held or [], None
            for entry in held:
                self._show_output(entry)
        if self.show_events:
            self._event_line("job", e)
        if name == self.wait_event:
            self.seen_event = True
        elif name == "exception":
            if ctx.get("severity", 0) == 0:
                self.fatal = True
            if not self.quiet_exceptions:
                sys.stderr.write(self._stamp(e) + exception_line(self.jobid, ctx) + "\n")
                sys.stderr.flush()
        elif name == "finish":
            self.status = ctx.get("status")

    # --------------------------------------------------------------- signals
    def _on_signal_pipe(self) -> None:
        try:
            data = os.read(self._sig_r, 64)
        except BlockingIOError:
            return
        for b in data:
            now = time.monotonic()
            if b == signal.SIGINT:
                if now - self.last_interrupt > 2.0:
                    self.last_interrupt = now
                    signal.signal(signal.SIGTSTP, _noted)  # ctrl-Z now detaches
                    sys.stderr.write(f"{self.prog}: one more ctrl-C within 2s to cancel "
                                     "or ctrl-Z to detach\n")
                else:
                    self._quietly(api.cancel_async(self.h, self.jobid,
                                                   "interrupted by ctrl-C"))
            elif b == signal.SIGTSTP:
                if now - self.last_interrupt <= 2.0:
                    sys.stderr.write(f"{self.prog}: detaching...\n")
                    self.detached = True
                else:  # the next ctrl-Z stops this command, as it would have
                    signal.signal(signal.SIGTSTP, signal.SIG_DFL)
                    sys.stderr.write(f"{self.prog}: one more ctrl-Z to suspend\n")
            elif b == signal.SIGTERM:
                self._quietly(api.kill_async(self.h, self.jobid, signal.SIGTERM))

    def _on_stdin(self) -> None:
        try:
            data = os.read(sys.stdin.fileno(), 65536)
        except OSError:
            data = b""
        ctx = {"stream": "stdin", "rank": "all"}
        if data:
            ctx.update(jel.encode_data(data))
        else:
            ctx["eof"] = True
            self.h.remove_fd(sys.stdin.fileno())
        if self.stdin_service is not None:
            service, leader = self.stdin_service
            ctx.pop("stream"), ctx.pop("rank")
            self._quietly(self.h.rpc(f"{service}.stdin", ctx, nodeid=leader))
            return
        self._quietly(api.eventlog_append_async(self.h, self.jobid, "input",
                                                jel.entry("data", ctx)))

    @staticmethod
    def _quietly(p) -> None:
        """Let a pending RPC's response go (the job's logs say what it did)."""
        p.on_response = lambda msg: None

    def run(self) -> int:
        # output first: the KVS answers in order, so a finished job's output is
        # replayed before its main eventlog says `clean`
        follow = api.Follower(self.h, self.jobid, "output", on_entry=self._on_output,
                              on_main=self._on_main, until_clean=True).start()
        execlog = api.Follower(self.h, self.jobid, "exec", on_entry=lambda e: self._event_line(
            "exec", e)).start() if self.show_exec else None
        self._sig_r, sig_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        old_fd = signal.set_wakeup_fd(sig_w)
        caught = () if self.read_only else (signal.SIGINT, signal.SIGTERM)
        old = {s: signal.signal(s, _noted) for s in caught}
        old[signal.SIGTSTP] = signal.getsignal(signal.SIGTSTP)
        self.h.add_fd(self._sig_r, self._on_signal_pipe)
        if self.forward_stdin:
            self.h.add_fd(sys.stdin.fileno(), self._on_stdin)
        try:
            self.h.run_until(lambda: (follow.done and (execlog is None or execlog.done))
                             or self.detached or self.seen_event or not self.h.connected)
        finally:
            if execlog is not None:
                execlog.close()
            if self.forward_stdin:
                self.h.remove_fd(sys.stdin.fileno())
            signal.set_wakeup_fd(old_fd)
            for s, handler in old.items():
                signal.signal(s, handler)
            os.close(self._sig_r)
            os.close(sig_w)
        for entry in self.held or []:  # no submit event seen: show them unstamped
            self._show_output(entry)
        for (stream, rank), rest in self.lines.tails():
            self._write(stream, rank, rest, eof=True)
        if self.detached or (self.seen_event and not follow.done):
            return 0
        if not self.h.connected and not follow.done:
            sys.stderr.write(f"{self.prog}: lost connection to the instance\n")
            return 1
        if follow.error is not None:
            sys.stderr.write(f"{self.prog}: {follow.error.message}\n")
            return 1
        code = states.exit_code(self.status, self.fatal)
        if self.status:
            msg = states.status_message(self.status)
            if msg:
                sys.stderr.write(f"{self.prog}: {msg}\n")
        return code


def stdin_has_data() -> bool:
    """A pipe or a regular file on stdin is forwarded to the tasks (a terminal or /dev/null
    is not: tasks of `run` then read nothing, as batch jobs do)."""
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode) or stat.S_ISSOCK(mode)


def _noted(signum, frame) -> None:
    """A signal handler that does nothing: the wakeup pipe carries the signal."""


def exception_line(jobid: int, ctx: dict) -> str:
    """How run, --watch and --wait show a job's exception (as Flux's job.exception)."""
    return (f"job.exception {fluid.f58(jobid)} type={ctx.get('type')} "
            f"severity={ctx.get('severity')} {ctx.get('note', '')}").rstrip()
