"""The spawner process: a warm fork server that starts a broker's processes.

It serves three methods, through the one Dispatcher, over the Unix socket it
shares with its broker (protocol/stream.py: the one codec on a byte stream):

    spawner.spawn  {kind: exec|shell, tmpdir_in, child}        streaming
                   -> {type: started, pid}, {type: exited, pid, status}, ENODATA;
                   or an error: the child's errno and "ARGV0: reason" (it did not exec)
    spawner.kill   {spawn: MATCHTAG, signum, below}            no response
    spawner.killall {}                                         no response

A process is named by the matchtag of the request that spawned it.  `child` is
what only the new process unpacks (ChildSpec, in the codec): a job's environment
and jobspec are hundreds of small objects, and built here they would be written
across as many of the spawner's pages, each shared with the shells it forked
before and so copied at the first write: ~200 page faults a job.  `info` in it
is the shell's, passed through unread.

`setsid` puts the process in a session of its own (`pgid` is ignored then) and
`ctty` makes its stdin that session's controlling terminal; without `setsid`,
`pgid` is the process group it joins.  `kill` signals the process, or with
`below` every process under it but not itself (SIGKILL or SIGSTOP from
`fluxlite job kill` are for a shell's tasks); a SIGKILL to a shell also kills
what is left in its session.  `exited` carries the pid, so a process that ends
before its `started` was read still names itself.

`stdio: connect` (rexec's commands, `fluxlite exec`): the child connects to two
Unix sockets the broker listens on, `stdio_path` + "o" (its stdin and stdout)
and + "e" (its stderr), before it execs, so the broker streams its output.

With `tmpdir_in`, the spawner makes a private directory there for the process
(a shell's entry is given its path) and removes it once the process is
reaped and its leftovers killed, before it reports the exit, or when the
spawner itself ends: a job's scratch files go with its shell however it ends.

Death follows the node model: the spawner is a child subreaper, so orphans stay
below it; on SIGTERM (its broker died), on a closed socket or on `killall` it
SIGKILLs every descendant.  When a job shell exits, whatever is left in its
session is killed too.  File modes: the processes started keep the broker's
umask, which is the user's; what the spawner itself creates (the shell log, the
private directories) is owner-only whatever the umask.
"""

from __future__ import annotations

import gc
import os
import selectors
import shutil
import signal
import socket
import sys
import tempfile
import traceback
from typing import Any, Literal, NamedTuple

from ...errors import FluxliteError, NoSuchProcess, ProtocolError
from ...protocol.dispatch import Dispatcher, handler
from ...protocol.message import REQUEST, Message, pack, unpack
from ...protocol.schema import CARRY_PAYLOAD, Matchtag, Signal, Struct, Text
from ...protocol.stream import CHUNK, StreamDecoder, encode_stream, recv_chunk
from ...util import procs

SPAWN, KILL, KILLALL = "spawner.spawn", "spawner.kill", "spawner.killall"
# a shell's info and a job's environment, with room to spare over what rexec takes
MAX_SPAWN_PAYLOAD = 2 * CARRY_PAYLOAD
# held back from a child between fork and its own handlers (see _fork)
_FORK_BLOCKED = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT}


class SpawnRequest(Struct, kw_only=True):
    kind: Literal["exec", "shell"]
    child: bytes                    # a ChildSpec in the codec, unpacked by the child only
    tmpdir_in: Text | None = None   # make the process a private directory here


class SignalRequest(Struct, kw_only=True):
    spawn: Matchtag                 # the spawn request's matchtag
    signum: Signal
    below: bool = False             # every process under it, not itself


class ChildSpec(NamedTuple):
    """What the new process does before it execs (or runs the shell entry).

    Read in the child only, by plain Python (child_spec()): checking it with msgspec
    there would fault msgspec's code into every job shell."""
    argv: list[str] | None = None   # kind exec
    env: dict[str, str] | None = None   # None: the spawner's environment
    cwd: str | None = None
    pgid: int | None = None
    setsid: bool = False
    ctty: bool = False
    stdio: str = "inherit"          # inherit | null | log | connect
    stdio_path: str | None = None
    info: Any = None                # kind shell: the shell's, passed through unread


STDIO_MODES = ("inherit", "null", "log", "connect")


class _Child(NamedTuple):
    request: Message    # the spawn request (payload dropped): its answers carry its matchtag
    kind: str
    tmpdir: str | None


class _StderrLog:
    """The dispatcher's logger here: the spawner's stderr is its broker's."""

    def error(self, event: str, **kw) -> None:
        print(f"fluxlite-spawner: {event} {kw.get('error', '')}".rstrip(), file=sys.stderr,
              flush=True)
        if kw.get("traceback"):
            print(kw["traceback"], file=sys.stderr, flush=True)

    def debug(self, event: str, **kw) -> None:
        """Dropped (a refused kill or killall, which nobody waits for)."""


class SpawnServer:
    def __init__(self, sock: socket.socket, *, shell_log: str | None, entry,
                 env: dict[str, str], warm=None):
        self.sock = sock
        self.warm = warm    # run once, after the first shell is forked
        self.shell_forked = False
        self.env = env      # what a child gets when its spec names no environment
        self.shell_log = shell_log
        self.entry = entry  # entry(info, env, tmpdir) -> exit code: what a "shell" runs
        self.children: dict[int, _Child] = {}    # pid -> what started it
        self.by_tag: dict[int, int] = {}          # spawn matchtag -> pid
        self.dispatcher = Dispatcher(self._queue, _StderrLog())
        self.dispatcher.add_object(self)
        self.decoder = StreamDecoder(MAX_SPAWN_PAYLOAD)
        self.sel = selectors.DefaultSelector()
        self._buf = bytearray(CHUNK)
        self._out: list[bytes] = []   # answers, sent together once per turn
        self.exiting = False
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def run(self) -> None:
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *a: None)
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        self.sel.register(self.sock, selectors.EVENT_READ, "sock")
        self.sel.register(self.wake_r, selectors.EVENT_READ, "wake")
        while not self.exiting:
            for key, _ in self.sel.select():
                if key.data == "sock":
                    self._read_requests()
                else:
                    try:
                        os.read(self.wake_r, 4096)
                    except BlockingIOError:
                        pass
                self._reap()
            self._flush()
            if self.shell_forked and self.warm is not None:
                self._warm()
        self._killall()
        self._reap_all()
        for child in self.children.values():
            if child.tmpdir is not None:
                shutil.rmtree(child.tmpdir, ignore_errors=True)

    def _warm(self) -> None:
        """Warm up while the first shell starts: the spawner is idle then, and the
        writes the warm-up makes stay here instead of being copied into each shell."""
        warm, self.warm = self.warm, None
        try:
            warm()
        except Exception:  # only a lost optimisation; the shells start as they would
            traceback.print_exc()
        gc.freeze()

    def _on_term(self, signum, frame) -> None:
        self.exiting = True

    # ------------------------------------------------------------ the link
    def _queue(self, msg: Message) -> None:
        self._out.append(encode_stream(msg))

    def _flush(self) -> None:
        if not self._out:
            return
        data = b"".join(self._out)
        self._out.clear()
        try:
            self.sock.sendall(data)
        except OSError:
            self.exiting = True

    def _read_requests(self) -> None:
        data = recv_chunk(self.sock, self._buf)
        if data is None:
            return
        if not data:
            self.exiting = True
            return
        try:
            messages = self.decoder.feed(data)
        except ProtocolError as exc:   # a stream out of step cannot be read on
            self.dispatcher.log.error("broker link unreadable", error=str(exc))
            self.exiting = True
            return
        for msg in messages:
            if msg.type == REQUEST:
                self.dispatcher.dispatch(msg)

    # ------------------------------------------------------------- methods
    @handler(SPAWN, schema=SpawnRequest, streaming=True, max_payload=MAX_SPAWN_PAYLOAD)
    def spawn(self, msg: Message, req: SpawnRequest) -> None:
        msg.drop_payload()   # kept until the exit is reported: its route and matchtag only
        tmpdir = None
        if req.tmpdir_in:
            # short (sockets live there); mkdtemp makes it 0700 whatever the umask
            try:
                tmpdir = tempfile.mkdtemp(prefix="j", dir=req.tmpdir_in)
            except OSError as exc:
                raise FluxliteError.from_oserror(exc, f"cannot make a directory in "
                                                      f"{req.tmpdir_in}") from None
        try:
            pid = self._fork(req, tmpdir)
        except BaseException as exc:
            if tmpdir is not None:
                shutil.rmtree(tmpdir, ignore_errors=True)  # it never started
            if isinstance(exc, OSError) and not isinstance(exc, FluxliteError):
                raise FluxliteError.from_oserror(exc, "spawner: cannot fork") from None
            raise
        self.children[pid] = _Child(msg, req.kind, tmpdir)
        self.by_tag[msg.matchtag] = pid
        self.shell_forked = self.shell_forked or req.kind == "shell"
        self.dispatcher.respond(msg, {"type": "started", "pid": pid})

    @handler(KILL, schema=SignalRequest)
    def kill(self, msg: Message, req: SignalRequest) -> dict:
        pid = self.by_tag.get(req.spawn)
        if pid is None:
            raise NoSuchProcess(f"no process spawned by request {req.spawn}")
        if req.below:
            # what the shell runs, not the shell (SIGKILL or SIGSTOP from
            # `fluxlite job kill` are for the tasks)
            procs.kill_tree({pid}, sig=req.signum)
            return {}
        try:
            os.kill(pid, req.signum)
        except ProcessLookupError:
            pass
        if req.signum == signal.SIGKILL and self.children[pid].kind == "shell":
            procs.kill_tree({pid}, {pid})
        return {}

    @handler(KILLALL)
    def killall(self, msg: Message, req: None) -> dict:
        self._killall()
        return {}

    def _killall(self) -> None:
        procs.kill_tree({os.getpid()})

    # ------------------------------------------------------------- reaping
    def _reap_all(self, timeout: float = 2.0) -> None:
        """Reap our killed children (so none is left <defunct>), bounded by `timeout`."""
        def expired(signum, frame):
            raise TimeoutError  # interrupts waitpid (Python retries it after a quiet handler)
        signal.signal(signal.SIGALRM, expired)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            while True:
                os.waitpid(-1, 0)
        except (ChildProcessError, TimeoutError):
            pass
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            child = self.children.pop(pid, None)
            if child is None:
                continue  # an adopted orphan
            self.by_tag.pop(child.request.matchtag, None)
            if child.kind == "shell":
                self._kill_leftovers(pid)
            if child.tmpdir is not None:
                shutil.rmtree(child.tmpdir, ignore_errors=True)
            self.dispatcher.respond(child.request, {"type": "exited", "pid": pid,
                                                    "status": status})
            self.dispatcher.end_stream(child.request)

    def _kill_leftovers(self, shell_pid: int) -> None:
        """Kill whatever an exited shell left behind.

        We are a subreaper, so the shell's surviving descendants now hang below
        children of ours that we did not start ("orphans").  Usually there are
        none, and reading our own children list is far cheaper than a scan of
        /proc after every job.  Orphans in the session of a child that still
        runs (another job's shell, the initial program) are left to it."""
        live = self.children.keys()
        orphans = {p for p in procs.children(os.getpid()) - live
                   if procs.session_of(p) not in live}
        if orphans:
            procs.kill_tree(orphans, {shell_pid}, include_roots=True)

    # ------------------------------------------------------------- forking
    def _fork(self, req: SpawnRequest, tmpdir: str | None) -> int:
        """Fork and start the process; its pid, or the error tree's exception for why
        it did not exec (a shell reports nothing here: it runs no exec)."""
        errpipe_r, errpipe_w = os.pipe2(os.O_CLOEXEC)
        # a signal sent to the child before it has put back the default handlers would
        # run the spawner's (and be lost): it stays pending until then (_setup)
        signal.pthread_sigmask(signal.SIG_BLOCK, _FORK_BLOCKED)
        pid = None
        try:
            pid = os.fork()
        finally:
            if pid != 0:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORK_BLOCKED)
        if pid == 0:
            os.close(errpipe_r)
            self._child(req, tmpdir, errpipe_w)   # never returns
        os.close(errpipe_w)
        error = b""
        if req.kind == "exec":
            # the pipe closes on a successful exec; otherwise it carries the reason
            while True:
                chunk = os.read(errpipe_r, 4096)
                if not chunk:
                    break
                error += chunk
        os.close(errpipe_r)
        if error:
            os.waitpid(pid, 0)
            raise _reported_error(error)
        return pid

    def _child(self, req: SpawnRequest, tmpdir: str | None, errpipe_w: int):
        """In the new process: set it up, then exec or run the shell entry.  A failure
        goes to the spawner through `errpipe_w` as [errno, sentence]."""
        what = "spawn"
        try:
            signal.set_wakeup_fd(-1)
            spec = child_spec(req.child)
            what = spec.argv[0] if spec.argv else what
            self._setup(spec)
            env = self.env if spec.env is None else spec.env
            if req.kind == "shell":
                self._run_shell(spec, env, errpipe_w, tmpdir)
            if not spec.argv:
                raise ProtocolError("spawn: kind exec needs argv")
            os.execvpe(spec.argv[0], spec.argv, env)
        except BaseException as exc:
            err = _child_error(what, exc)
            try:
                os.write(errpipe_w, pack([err.errnum, err.message[:4000]]))
            except OSError:
                pass
        os._exit(127)

    def _setup(self, spec: ChildSpec) -> None:
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP,
                    signal.SIGPIPE, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORK_BLOCKED)   # now they may come
        procs.set_pdeathsig(signal.SIGKILL)
        if spec.setsid:
            os.setsid()
            if spec.ctty:
                import fcntl
                import termios
                fcntl.ioctl(0, termios.TIOCSCTTY, 0)  # stdin becomes our terminal
        elif spec.pgid is not None:
            try:
                os.setpgid(0, spec.pgid)
            except OSError:
                os.setpgid(0, 0)
        self._stdio(spec)
        if spec.cwd:
            os.chdir(spec.cwd)

    def _run_shell(self, spec: ChildSpec, env: dict[str, str], errpipe_w: int,
                   tmpdir: str | None):
        self.sock.close()
        self.sel.close()
        os.close(self.wake_r)
        os.close(self.wake_w)
        os.close(errpipe_w)
        code = 1
        try:
            code = self.entry(spec.info, env, tmpdir)
        except BaseException:
            traceback.print_exc()
        finally:
            try:
                sys.stderr.flush()
            except Exception:
                pass
        os._exit(code)

    def _stdio(self, spec: ChildSpec) -> None:
        mode = spec.stdio
        if mode == "inherit":
            return
        if mode == "connect":
            # the broker listens at PATH.o (stdin and stdout) and PATH.e (stderr)
            ends = []
            for suffix in ("o", "e"):
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.connect((spec.stdio_path or "") + suffix)
                ends.append(sock)
            os.dup2(ends[0].fileno(), 0)
            os.dup2(ends[0].fileno(), 1)
            os.dup2(ends[1].fileno(), 2)
            for sock in ends:
                sock.close()
            return
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        err = null
        if mode == "log" and self.shell_log:
            # owner-only whatever the umask, which the process keeps for its tasks
            err = os.open(self.shell_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT |
                          os.O_NOFOLLOW, 0o600)
            os.fchmod(err, 0o600)
        os.dup2(err, 2)


def child_spec(data: bytes) -> ChildSpec:
    """The child's part of a spawn request, checked: ProtocolError says what is wrong."""
    try:
        fields = unpack(data)
        spec = ChildSpec(**fields)
    except (ValueError, TypeError) as exc:
        raise ProtocolError(f"spawn: child: {exc}") from None
    if spec.argv is not None and (type(spec.argv) is not list
                                  or not all(type(a) is str for a in spec.argv)):
        raise ProtocolError("spawn: child: argv must be a list of strings")
    if spec.env is not None and (type(spec.env) is not dict or not all(
            type(k) is str and type(v) is str for k, v in spec.env.items())):
        raise ProtocolError("spawn: child: env must map strings to strings")
    if spec.stdio not in STDIO_MODES:
        raise ProtocolError(f"spawn: child: stdio must be one of {', '.join(STDIO_MODES)}")
    for name in ("cwd", "stdio_path"):
        if getattr(spec, name) is not None and type(getattr(spec, name)) is not str:
            raise ProtocolError(f"spawn: child: {name} must be a string")
    if spec.pgid is not None and type(spec.pgid) is not int:
        raise ProtocolError("spawn: child: pgid must be an integer")
    return spec


def _child_error(what: str, exc: BaseException) -> FluxliteError:
    """Why a child did not start, as the error tree says it: "ARGV0: reason"."""
    if isinstance(exc, FluxliteError):
        return exc
    if isinstance(exc, OSError) and exc.errno is not None:
        return FluxliteError.from_oserror(exc, what)
    return FluxliteError(f"{what}: {exc!r}")


def _reported_error(data: bytes) -> FluxliteError:
    """The error a child wrote to its pipe ([errno, sentence]) as the tree's class."""
    try:
        num, text = unpack(data)
        if type(num) is int and num > 0 and type(text) is str:
            return FluxliteError(text, num)
    except (ValueError, TypeError):
        pass
    return FluxliteError(f"spawn: the child's report is unreadable: {data[:80]!r}")
