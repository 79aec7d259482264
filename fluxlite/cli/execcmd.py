"""`fluxlite exec`: run a command on broker ranks, outside any job (flux-exec(1)).

Each target rank's `rexec` service starts the command as its broker's child
(`rexec.exec` with `output`), streams its stdout and stderr back, and feeds it
what this command reads on stdin (`rexec.write`).  SIGINT and SIGTERM are
forwarded; after a second Ctrl-C, a third within 2 s leaves at once.  The exit
code is Flux's: the largest of the commands' exit codes, 128+N for one killed
by signal N, 126 or 127 for one that could not start, 68 for an unreachable
rank.  With `--jobid`, the targets are the broker ranks of a running job, and
--rank, --exclude and the labels count from the job's first rank, as Flux's.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import time
import uuid

import click

from ..errors import FluxliteError, UsageError
from .common import NO_INTERSPERSED, handle, parse_jobid

INTERRUPT_WINDOW = 2.0


def _idset(text: str, option: str) -> set[int]:
    from ..util import idset
    try:
        return idset.decode(text)
    except ValueError:
        raise UsageError(f"{option}: {text!r} is not an idset (e.g. 0-3,5) or 'all'") from None


def target_ranks(size: int, rank: str, exclude: str | None) -> list[int]:
    """flux-exec's targets: --rank (default all) less --exclude."""
    if rank == "all":
        ranks = set(range(size))
    else:
        ranks = _idset(rank, "--rank")
        bad = sorted(r for r in ranks if r >= size)
        if bad:
            from ..util import idset
            raise UsageError(f"One or more invalid --ranks specified: {idset.encode(bad)}")
    if exclude:
        ranks -= _idset(exclude, "--exclude")
    if not ranks:
        raise UsageError("No targets specified")
    return sorted(ranks)


class _Run:
    """One command on one rank: its stream of responses, its line buffers."""

    def __init__(self, rank: int, label: str, shown: int):
        self.rank = rank
        self.shown = shown     # the rank printed: the broker's, or the job's with --jobid
        self.label = label
        self.pending = None
        self.done = False
        self.code = 0
        self.why = ""          # "Exit 3", a signal's name
        self.partial = {"stdout": b"", "stderr": b""}
        self.inbox: list[bytes] | None = []   # stdin read before it started (None: sent)


class Exec:
    def __init__(self, h, ranks, argv, *, cwd, label_io, noinput, verbose, quiet,
                 shown=None, label=None):
        self.h = h
        self.argv = argv
        self.cwd = cwd
        self.label_io = label_io
        self.noinput = noinput
        self.verbose = verbose
        self.quiet = quiet
        tag = uuid.uuid4().hex[:12]
        shown = shown or ranks
        self.runs = [_Run(r, label or f"exec-{tag}-{r}", s) for r, s in zip(ranks, shown)]
        self.last_interrupt = 0.0
        self.interrupts = 0
        self.forced = False

    # ----------------------------------------------------------- responses
    def _on_response(self, run: _Run, msg) -> None:
        if msg.errnum:
            if msg.errnum != errno.ENODATA:
                self._failed(run, msg.errnum, msg.errstr or os.strerror(msg.errnum))
            run.done = True
            return
        p = msg.payload or {}
        kind = p.get("type")
        if kind == "started":
            if self.noinput:
                self._write(run, b"")
            else:
                for data in run.inbox:
                    self._write(run, data)
            run.inbox = None
        elif kind == "output":
            self._output(run, p.get("stream", "stdout"), p.get("data") or b"")
        elif kind == "exited":
            self._flush(run)
            self._exited(run, int(p.get("status", 0)))

    def _output(self, run: _Run, stream: str, data: bytes) -> None:
        out = sys.stdout.buffer if stream == "stdout" else sys.stderr.buffer
        if not self.label_io:
            out.write(data)
            out.flush()
            return
        buf = run.partial[stream] + data
        *lines, rest = buf.split(b"\n")
        run.partial[stream] = rest
        if lines:
            prefix = f"{run.shown}: ".encode()
            out.write(b"".join(prefix + ln + b"\n" for ln in lines))
            out.flush()

    def _flush(self, run: _Run) -> None:
        for stream, rest in run.partial.items():
            if rest:
                out = sys.stdout.buffer if stream == "stdout" else sys.stderr.buffer
                out.write(f"{run.shown}: ".encode() + rest + b"\n")
                out.flush()
                run.partial[stream] = b""

    def _exited(self, run: _Run, status: int) -> None:
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            run.code = 128 + sig
            run.why = signal.strsignal(sig) or f"Signal {sig}"
        else:
            run.code = os.WEXITSTATUS(status)
            run.why = f"Exit {run.code}" if run.code else ""

    def _failed(self, run: _Run, errnum: int, errstr: str) -> None:
        sys.stderr.write(f"fluxlite exec: Error: rank {run.shown}: {self.argv[0]}: "
                         f"{_reason(errstr, self.argv[0])}\n")
        run.code = {errno.EPERM: 126, errno.EACCES: 126, errno.ENOENT: 127,
                    errno.EHOSTUNREACH: 68}.get(errnum, 1)

    @staticmethod
    def _quietly(p) -> None:
        p.on_response = lambda msg: None

    # ------------------------------------------------------------- input, signals
    def _on_stdin(self) -> None:
        try:
            data = os.read(sys.stdin.fileno(), 65536)
        except OSError:
            data = b""
        if not data:
            self.h.remove_fd(sys.stdin.fileno())
        for run in self.runs:
            if run.done:
                continue
            if run.inbox is not None:
                run.inbox.append(data)
            else:
                self._write(run, data)

    def _write(self, run: _Run, data: bytes) -> None:
        """Input for one command; empty data is the end of it."""
        payload = {"label": run.label, "data": data, "eof": not data}
        self._quietly(self.h.rpc("rexec.write", payload, nodeid=run.rank))

    def _on_signal_pipe(self) -> None:
        try:
            data = os.read(self._sig_r, 64)
        except BlockingIOError:
            return
        for signum in data:
            # not only those whose start was heard: a command may run before we know
            running = [r for r in self.runs if not r.done]
            now = time.monotonic()
            if (signum == signal.SIGINT and self.interrupts >= 2
                    and now - self.last_interrupt < INTERRUPT_WINDOW):
                from ..util import idset
                hanging = idset.encode(r.shown for r in running)
                sys.stderr.write(f"[{hanging}]: command still running at exit\n")
                self.forced = True
                return
            if self.verbose:
                sys.stderr.write(f"sending signal {signum} to {len(running)} running "
                                 "processes\n")
            for run in running:
                self._quietly(self.h.rpc("rexec.kill", {"label": run.label, "signum": signum},
                                         nodeid=run.rank))
            if signum == signal.SIGINT:
                if self.interrupts:
                    sys.stderr.write("interrupt (Ctrl+C) one more time within "
                                     f"{INTERRUPT_WINDOW:.2f} sec to exit\n")
                self.last_interrupt = now
                self.interrupts += 1

    # ------------------------------------------------------------------ run
    def run(self) -> int:
        # signals are caught before any command starts, so none goes unforwarded
        self._sig_r, sig_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        old_fd = signal.set_wakeup_fd(sig_w)
        old = {s: signal.signal(s, lambda *a: None) for s in (signal.SIGINT, signal.SIGTERM)}
        self.h.add_fd(self._sig_r, self._on_signal_pipe)
        env = dict(os.environ)
        for run in self.runs:
            payload = {"kind": "exec", "label": run.label, "argv": self.argv, "env": env,
                       "cwd": self.cwd, "output": True}
            p = self.h.rpc("rexec.exec", payload, nodeid=run.rank, streaming=True)
            run.pending = p
            p.on_response = lambda msg, run=run: self._on_response(run, msg)
        stdin = not self.noinput and _readable(sys.stdin)
        if stdin:
            self.h.add_fd(sys.stdin.fileno(), self._on_stdin)
        try:
            self.h.run_until(lambda: self.forced or all(r.done for r in self.runs)
                             or not self.h.connected)
        finally:
            if stdin:
                self.h.remove_fd(sys.stdin.fileno())
            signal.set_wakeup_fd(old_fd)
            for s, handler in old.items():
                signal.signal(s, handler)
            os.close(self._sig_r)
            os.close(sig_w)
        if self.forced:
            return 1
        if not self.h.connected:
            sys.stderr.write("fluxlite exec: lost connection to the instance\n")
            return 1
        if not self.quiet:
            self._report()
        return max(r.code for r in self.runs)

    def _report(self) -> None:
        """flux-exec's closing lines: '[RANKS]: Exit N' per distinct ending."""
        from ..util import idset
        sets: dict[str, list[int]] = {}
        for r in self.runs:
            if r.why:
                sets.setdefault(r.why, []).append(r.shown)
        for why, ranks in sets.items():
            sys.stderr.write(f"[{idset.encode(ranks)}]: {why}\n")


def _job_ranks(h, jobid: int) -> list[int]:
    """The broker ranks of a running job, in order (UsageError when it runs nowhere)."""
    from ..job import states
    from ..jobapi import api
    from ..util import fluid, idset
    job = api.info(h, jobid)
    if job.get("state") not in states.RUNNING or not job.get("ranks"):
        raise UsageError(f"job {fluid.f58(jobid)} is not running")
    return sorted(idset.decode(job["ranks"]))


def _reason(errstr: str, cmd: str) -> str:
    # the spawner says "CMD: reason"; flux-exec names the command once
    prefix = f"{cmd}: "
    return errstr[len(prefix):] if errstr.startswith(prefix) else errstr


def _readable(stream) -> bool:
    try:
        return stream is not None and stream.fileno() >= 0
    except (OSError, ValueError):
        return False


@click.command("exec", context_settings=NO_INTERSPERSED)
@click.option("-r", "--rank", default="all", show_default=True, metavar="IDSET",
              help="Ranks to run on: an idset such as 0-2,5, or all.")
@click.option("-x", "--exclude", default=None, metavar="IDSET", help="Ranks to leave out.")
@click.option("-j", "--jobid", default=None, metavar="JOBID",
              help="Run on the ranks of this running job; --rank and --exclude count "
                   "from its first rank.")
@click.option("-l", "--label-io", is_flag=True, help="Prefix each output line with 'RANK: '.")
@click.option("-n", "--noinput", is_flag=True,
              help="Do not forward stdin: the commands read end-of-file.")
@click.option("-d", "--dir", "cwd", default=None, metavar="DIR",
              help="Working directory of the commands (default: this one's).")
@click.option("-v", "--verbose", is_flag=True, help="Say which signals are forwarded.")
@click.option("-q", "--quiet", is_flag=True,
              help="Leave out the closing lines that give each rank's nonzero exit.")
@click.option("--with-imp", is_flag=True,
              help="Run COMMAND under `flux-imp run` (refused: fluxlite has no IMP).")
@click.option("--bg", is_flag=True,
              help="Start COMMAND in the background: print 'RANK: PID' for each, and "
                   "exit once all have started (their output is discarded).")
@click.option("--waitable", is_flag=True,
              help="With --bg: accepted (a background process here is reaped when it "
                   "exits).")
@click.option("--label", default=None, metavar="LABEL",
              help="Name the process LABEL on each rank (unique among a rank's "
                   "processes).")
@click.option("--attach", is_flag=True,
              help="Attach to a background process (refused: its output is not kept).")
@click.argument("command", nargs=-1, required=True)
def exec_(rank, exclude, jobid, label_io, noinput, cwd, verbose, quiet, with_imp, bg,
          waitable, label, attach, command):
    """Run COMMAND on broker ranks (default: every rank), outside any job, as flux exec.

    Output comes back on this command's stdout and stderr, stdin goes to
    every command, SIGINT and SIGTERM are forwarded (after a second Ctrl-C,
    a third within 2 s leaves).  Exits with the largest exit code (128+N for signal N; 127: not
    found, 126: not executable, 68: unreachable rank).  Only the instance
    owner may run it."""
    _check_modes(with_imp=with_imp, bg=bg, waitable=waitable, attach=attach)
    with handle() as h:
        if jobid is None:
            ranks = target_ranks(int(h.getattr("size")), rank, exclude)
            shown = ranks
        else:
            brokers = _job_ranks(h, parse_jobid(jobid))
            shown = target_ranks(len(brokers), rank, exclude)
            ranks = [brokers[i] for i in shown]
        if bg:
            code = background(h, ranks, shown, list(command), cwd=cwd or os.getcwd(),
                              label=label)
        else:
            code = Exec(h, ranks, list(command), cwd=cwd or os.getcwd(), label_io=label_io,
                        noinput=noinput, verbose=verbose, quiet=quiet, shown=shown,
                        label=label).run()
    sys.exit(code)


def _check_modes(*, with_imp: bool, bg: bool, waitable: bool, attach: bool) -> None:
    """flux-exec's rules for --bg, --waitable and --attach, and --with-imp without an
    IMP (as Flux's with no exec.imp configured: one line, exit 1)."""
    if attach:
        if bg or waitable:
            raise UsageError("--attach cannot be used with --bg or --waitable")
        raise FluxliteError("--attach: fluxlite keeps no output of background processes "
                            "to attach to (run the command without --bg to see it)")
    if waitable and not bg:
        raise UsageError("--waitable can only be used with --bg")
    if with_imp:
        raise FluxliteError("--with-imp: exec.imp path not found in config (fluxlite has "
                            "no IMP: commands run as the instance owner; leave out "
                            "--with-imp)")


def background(h, ranks: list[int], shown: list[int], argv: list[str], *, cwd: str,
               label: str | None) -> int:
    """--bg: start the command on each rank and print 'RANK: PID' as each starts; the
    processes run on as their brokers' children.  1 if any failed to start."""
    tag = label or f"exec-bg-{uuid.uuid4().hex[:12]}"
    pending = {}
    for rank, rank_shown in zip(ranks, shown):
        payload = {"kind": "exec", "label": tag, "argv": argv, "env": dict(os.environ),
                   "cwd": cwd}
        pending[rank_shown] = h.rpc("rexec.exec", payload, nodeid=rank, streaming=True)
    code = 0
    for rank_shown, p in pending.items():
        try:
            h.wait(p)
            started = p.take()
        except FluxliteError as exc:
            sys.stderr.write(f"fluxlite exec: Error: rank {rank_shown}: {argv[0]}: "
                             f"{_reason(exc.message, argv[0])}\n")
            code = 1
            continue
        click.echo(f"{rank_shown}: {started.get('pid')}")
    if code:
        sys.stderr.write("fluxlite exec: failed to start all processes in background\n")
    return code
