"""The warm fork server: how a broker starts job shells and other local processes.

Each broker forks its spawner first thing, before it opens any ZeroMQ socket,
so the spawner holds no context that a child could inherit.  The spawner has
the job shell's modules already imported: a shell is a plain fork of it (no
interpreter start-up), and creates its own ZeroMQ context after the fork.

Broker and spawner talk over a Unix stream socket carrying msgpack maps:

    broker  -> spawner  {op: spawn, tag, kind: exec|shell, tmpdir_in, child}
                        child: msgpack bytes of {argv, env, cwd, pgid, setsid, ctty,
                        stdio: inherit|null|log|connect, stdio_path, info}
                        {op: kill, tag, signum, below}  {op: killall}
    spawner -> broker   {op: started, tag, pid}
                        {op: failed, tag, error, errno}  (the child's errno, else EIO)
                        {op: exited, tag, pid, status}

`child` is what only the new process reads, and only it unpacks it: a
job's environment and jobspec are hundreds of small objects, and built in the
spawner they would be written across as many of its memory pages, each one
shared with the shells it forked before and so copied (a page fault) at the
first write: ~200 faults a job, most of the spawner's own work.

`setsid` puts the process in a session of its own (`pgid` is ignored then) and
`ctty` makes its stdin that session's controlling terminal; without `setsid`,
`pgid` is the process group it joins.  `kill` signals the process, or with
`below` every process under it but not itself (SIGKILL or SIGSTOP from
`fluxlite job kill` are for a shell's tasks); a SIGKILL to a shell also kills
what is left in its session.  `failed` answers a spawn that did not exec (or a
request the spawner could not read); `exited` carries the pid, so a process
that ends before its `started` was read still names itself.

`stdio: connect` (rexec's commands, `fluxlite exec`): the child connects to two
Unix sockets the broker listens on, `stdio_path` + "o" (its stdin and stdout)
and + "e" (its stderr), before it execs, so the broker streams its output.

Death follows the node model.  The spawner gets SIGTERM when the broker
dies (PR_SET_PDEATHSIG); it is a child subreaper, so orphans stay below it; on
SIGTERM, on a closed socket or on `killall` it SIGKILLs every descendant.  When
a job shell exits, whatever is left in its session is killed too.

The spawner knows no job shell: what a "shell" process runs is the `entry`
function the broker gives start_spawner() (fluxlite.shell.main.run_forked_shell);
`preload` (fluxlite.shell.main.preload) imports its modules before the first fork,
and `warm` (fluxlite.shell.main.warm_spawner) runs once the first shell is forked,
so later shells start warm and an instance that runs no job never pays for it.

With `tmpdir_in`, the spawner makes a private directory there for the process
(a shell finds it as `tmpdir` in its info) and removes it once the process is
reaped and its leftovers killed, before it reports the exit, or when the
spawner itself ends: a job's scratch files go with its shell however it ends.

File modes: the processes started keep the broker's umask, which is the user's,
so a job's output files follow it as Flux's do.  What the spawner itself
creates (the shell log, the private directories) is owner-only whatever the umask.
"""

from __future__ import annotations

import asyncio
import errno
import gc
import os
import selectors
import shutil
import signal
import socket
import sys
import tempfile
import traceback

import msgpack

from ..protocol.message import pack, unpack
from ..util import procs
from ..util.proctitle import set_title

_packb = msgpack.Packer(use_bin_type=True).pack


_CHUNK = 256 << 10   # bytes read at once (a recv(n) would allocate n bytes every time)


def _recv_chunk(sock: socket.socket, buf: bytearray) -> memoryview | None:
    """What the other side sent, read into `buf`: None if nothing yet, empty once it
    is gone.  Valid until the next read into `buf`."""
    try:
        n = sock.recv_into(buf)
    except (BlockingIOError, InterruptedError):
        return None
    except OSError:
        n = 0
    return memoryview(buf)[:n]


def _unpacker() -> msgpack.Unpacker:
    return msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=256 << 20)


# ---------------------------------------------------------------- spawner side
class _Server:
    def __init__(self, sock: socket.socket, name: str, shell_log: str | None, entry,
                 env: dict[str, str], warm=None):
        self.sock = sock
        self.warm = warm    # run once, after the first shell is forked
        self.shell_forked = False
        self.env = env      # what a child gets when its request names no environment
        self.name = name
        self.shell_log = shell_log
        self.entry = entry  # entry(info, env) -> exit code: what a "shell" process runs
        self.children: dict[int, tuple[int, str]] = {}   # pid -> (tag, kind)
        self.tmpdirs: dict[int, str] = {}                 # pid -> its private directory
        self.sel = selectors.DefaultSelector()
        self.unpacker = _unpacker()
        self._buf = bytearray(_CHUNK)
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
            if self.shell_forked and self.warm is not None:
                self._warm()
        self._killall()
        self._reap_all()
        for path in self.tmpdirs.values():
            shutil.rmtree(path, ignore_errors=True)

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

    def _send(self, obj: dict) -> None:
        try:
            self.sock.sendall(_packb(obj))
        except OSError:
            self.exiting = True

    def _read_requests(self) -> None:
        data = _recv_chunk(self.sock, self._buf)
        if data is None:
            return
        if not data:
            self.exiting = True
            return
        self.unpacker.feed(data)
        for req in self.unpacker:
            if not isinstance(req, dict):
                continue
            op = req.get("op")
            try:
                if op == "spawn":
                    self._spawn(req)
                elif op == "kill":
                    self._kill(req)
                elif op == "killall":
                    self._killall()
            except Exception as exc:  # a bad request must not kill the spawner
                self._send({"op": "failed", "tag": req.get("tag"), "error": repr(exc),
                            "errno": getattr(exc, "errno", None) or errno.EIO})

    def _kill(self, req: dict) -> None:
        tag, sig = req.get("tag"), int(req.get("signum", signal.SIGTERM))
        for pid, (t, kind) in list(self.children.items()):
            if t == tag and req.get("below"):
                # what the shell runs, not the shell (SIGKILL or SIGSTOP from
                # `fluxlite job kill` are for the tasks)
                procs.kill_tree({pid}, sig=sig)
            elif t == tag:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
                if sig == signal.SIGKILL and kind == "shell":
                    procs.kill_tree({pid}, {pid})

    def _killall(self) -> None:
        procs.kill_tree({os.getpid()})

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
            entry = self.children.pop(pid, None)
            if entry is None:
                continue  # an adopted orphan
            tag, kind = entry
            if kind == "shell":
                self._kill_leftovers(pid)
            tmpdir = self.tmpdirs.pop(pid, None)
            if tmpdir is not None:
                shutil.rmtree(tmpdir, ignore_errors=True)
            self._send({"op": "exited", "tag": tag, "pid": pid, "status": status})

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

    def _spawn(self, req: dict) -> None:
        tag, kind = req["tag"], req.get("kind", "exec")
        tmpdir = None
        if req.get("tmpdir_in"):
            # short (sockets live there); mkdtemp makes it 0700 whatever the umask
            tmpdir = req["tmpdir"] = tempfile.mkdtemp(prefix="j", dir=req["tmpdir_in"])
        pid = None
        try:
            pid = self._fork(req, tag, kind)
        finally:
            if tmpdir is not None and pid is None:
                shutil.rmtree(tmpdir, ignore_errors=True)  # it never started
            elif tmpdir is not None:
                self.tmpdirs[pid] = tmpdir

    def _fork(self, req: dict, tag: int, kind: str) -> int | None:
        """Fork and start the process; its pid, or None if it failed to start."""
        errpipe_r, errpipe_w = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:
            os.close(errpipe_r)
            try:
                self._child(req, kind, errpipe_w)
            except BaseException as exc:
                num = exc.errno if isinstance(exc, OSError) and exc.errno else errno.EIO
                msg = f"{num}:{_exec_error(req, exc)}"
                try:
                    os.write(errpipe_w, msg.encode()[:4000])
                except OSError:
                    pass
                os._exit(127)
            os._exit(0)
        os.close(errpipe_w)
        error = b""
        if kind == "exec":
            # the pipe closes on a successful exec; otherwise it carries the reason
            while True:
                chunk = os.read(errpipe_r, 4096)
                if not chunk:
                    break
                error += chunk
        os.close(errpipe_r)
        if error:
            os.waitpid(pid, 0)
            num, _, text = error.decode(errors="replace").partition(":")
            self._send({"op": "failed", "tag": tag, "error": text,
                        "errno": int(num) if num.isdigit() else errno.EIO})
            return None
        self.children[pid] = (tag, kind)
        self.shell_forked = self.shell_forked or kind == "shell"
        self._send({"op": "started", "tag": tag, "pid": pid})
        return pid

    def _child(self, req: dict, kind: str, errpipe_w: int) -> None:
        signal.set_wakeup_fd(-1)
        child = req.pop("child", None)
        if child:
            req.update(unpack(child))
        if kind == "shell" and req.get("tmpdir") and isinstance(req.get("info"), dict):
            req["info"]["tmpdir"] = req["tmpdir"]
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP,
                    signal.SIGPIPE, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_DFL)
        procs.set_pdeathsig(signal.SIGKILL)
        if req.get("setsid"):
            os.setsid()
            if req.get("ctty"):
                import fcntl
                import termios
                fcntl.ioctl(0, termios.TIOCSCTTY, 0)  # stdin becomes our terminal
        elif req.get("pgid") is not None:
            try:
                os.setpgid(0, int(req["pgid"]))
            except OSError:
                os.setpgid(0, 0)
        self._stdio(req)
        if req.get("cwd"):
            os.chdir(req["cwd"])
        env = req.get("env")
        if env is None:
            env = self.env
        if kind == "shell":
            self.sock.close()
            self.sel.close()
            os.close(self.wake_r)
            os.close(self.wake_w)
            os.close(errpipe_w)
            code = 1
            try:
                code = self.entry(req["info"], env)
            except BaseException:
                traceback.print_exc()
            finally:
                try:
                    sys.stderr.flush()
                except Exception:
                    pass
            os._exit(code)
        argv = req["argv"]
        os.execvpe(argv[0], argv, env)

    def _stdio(self, req: dict) -> None:
        mode = req.get("stdio", "inherit")
        if mode == "inherit":
            return
        if mode == "connect":
            # the broker listens at PATH.o (stdin and stdout) and PATH.e (stderr)
            ends = []
            for suffix in ("o", "e"):
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.connect(req["stdio_path"] + suffix)
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


def _exec_error(req: dict, exc: BaseException) -> str:
    argv = req.get("argv") or ["?"]
    if isinstance(exc, OSError) and exc.errno is not None:
        return f"{argv[0]}: {os.strerror(exc.errno)}"
    return f"{argv[0]}: {exc!r}"


def start_spawner(name: str, shell_log: str | None = None, *, entry=None,
                  preload=None, warm=None, close_fds: tuple[int, ...] = (),
                  env: dict[str, str] | None = None) -> Spawner:
    """Fork the spawner.  Call before this process creates any ZeroMQ context.

    `entry(info, env)` is what a "shell" process runs; `preload()` imports what it
    needs, once, before the first fork; `warm()` runs once the first shell is
    forked; `close_fds` are the broker's own (its overlay's listening socket),
    which the spawner and its shells must not hold;
    `env` is the environment of every child whose request names none (default:
    this process's)."""
    env = dict(os.environ) if env is None else env
    parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    broker_pid = os.getpid()
    pid = os.fork()
    if pid == 0:
        parent_sock.close()
        for fd in close_fds:
            os.close(fd)
        code = 0
        try:
            # its own process group: a signal sent to the broker's group (a nested
            # broker is a job's task) is for the broker, which decides what to do
            os.setpgid(0, 0)
            procs.set_pdeathsig(signal.SIGTERM)
            procs.set_child_subreaper()
            set_title(name)
            if os.getppid() != broker_pid:  # the broker died before PDEATHSIG was armed
                os._exit(1)
            if preload is not None:
                preload()
            # what exists now lives as long as the spawner: keep it out of the
            # collector, so a forked shell's collections neither walk it nor write
            # to its pages (each write copies a page the shell shares with us)
            gc.freeze()
            _Server(child_sock, name, shell_log, entry, env, warm).run()
        except BaseException:
            traceback.print_exc()
            code = 1
        os._exit(code)
    child_sock.close()
    return Spawner(parent_sock, pid)


# ----------------------------------------------------------------- broker side
class SpawnedProcess:
    """A process the spawner started: await `started` (pid) and `exited` (wait status)."""

    def __init__(self, tag: int, kind: str):
        loop = asyncio.get_running_loop()
        self.tag = tag
        self.kind = kind
        self.pid: int | None = None
        self.started: asyncio.Future = loop.create_future()
        self.exited: asyncio.Future = loop.create_future()


class Spawner:
    def __init__(self, sock: socket.socket, pid: int):
        self.sock = sock
        self.pid = pid
        self.procs: dict[int, SpawnedProcess] = {}
        self._next = 1
        self._unpacker = _unpacker()
        self._buf = bytearray(_CHUNK)
        self._loop: asyncio.AbstractEventLoop | None = None
        self.on_exit = None  # callback(pid) when any process exits
        self.closed = False
        self._out = bytearray()
        self._writing = False

    def attach(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.sock.setblocking(False)
        self._loop.add_reader(self.sock.fileno(), self._on_readable)

    def _on_readable(self) -> None:
        data = _recv_chunk(self.sock, self._buf)
        if data is None:
            return
        if not data:
            self._lost()
            return
        self._unpacker.feed(data)
        for msg in self._unpacker:
            self._handle(msg)

    def _handle(self, msg: dict) -> None:
        p = self.procs.get(msg.get("tag"))
        if p is None:
            return
        op = msg.get("op")
        if op == "started":
            p.pid = msg["pid"]
            if not p.started.done():
                p.started.set_result(p.pid)
        elif op == "failed":
            self.procs.pop(p.tag, None)
            num = msg.get("errno")
            err = OSError(num if type(num) is int else errno.EIO, msg.get("error", "spawn failed"))
            if not p.started.done():
                p.started.set_exception(err)
            if not p.exited.done():
                p.exited.set_exception(err)
                p.exited.exception()  # mark retrieved
        elif op == "exited":
            self.procs.pop(p.tag, None)
            if not p.started.done():
                p.started.set_result(msg.get("pid"))
            if not p.exited.done():
                p.exited.set_result(msg["status"])
            if self.on_exit is not None:
                self.on_exit(msg.get("pid"))

    def _lost(self) -> None:
        if self._loop is not None and not self.closed:
            self._loop.remove_reader(self.sock.fileno())
            if self._writing:
                self._loop.remove_writer(self.sock.fileno())
                self._writing = False
        self.closed = True
        for p in list(self.procs.values()):
            err = OSError(errno.ECHILD, "spawner exited")
            for fut in (p.started, p.exited):
                if not fut.done():
                    fut.set_exception(err)
                    fut.exception()
        self.procs.clear()

    def _send(self, obj: dict) -> None:
        """Queue a request; never block the event loop (the spawner may be busy sending too)."""
        if self.closed:
            raise OSError(errno.EPIPE, "spawner is gone")
        self._out += _packb(obj)
        self._flush()

    def _flush(self) -> None:
        while self._out:
            try:
                n = self.sock.send(self._out)
            except BlockingIOError:
                break
            except OSError:
                self._out.clear()
                self._lost()
                return
            del self._out[:n]
        if self._loop is None:
            return
        if self._out and not self._writing:
            self._loop.add_writer(self.sock.fileno(), self._flush)
            self._writing = True
        elif not self._out and self._writing:
            self._loop.remove_writer(self.sock.fileno())
            self._writing = False

    def spawn(self, kind: str = "exec", *, argv=None, env=None, cwd=None, pgid=None,
              setsid: bool = False, ctty: bool = False, stdio: str = "inherit",
              stdio_path: str | None = None, info=None,
              tmpdir_in: str | None = None) -> SpawnedProcess:
        """Start a process; with `tmpdir_in`, it gets a private directory made there,
        removed once it is reaped."""
        tag = self._next
        self._next += 1
        p = SpawnedProcess(tag, kind)
        self.procs[tag] = p
        self._send({"op": "spawn", "tag": tag, "kind": kind, "tmpdir_in": tmpdir_in,
                    "child": pack({"argv": argv, "env": env, "cwd": cwd, "pgid": pgid,
                                     "setsid": setsid, "ctty": ctty, "stdio": stdio,
                                     "stdio_path": stdio_path, "info": info})})
        return p

    def kill(self, proc: SpawnedProcess, signum: int, *, below: bool = False) -> None:
        """Signal the process, or with `below` every process under it but not itself."""
        if proc.tag in self.procs:
            self._send({"op": "kill", "tag": proc.tag, "signum": int(signum), "below": below})

    def killall(self) -> None:
        if not self.closed:
            try:
                self._send({"op": "killall"})
            except OSError:
                pass

    def close(self) -> None:
        """Stop the spawner: it kills every process below it, then exits."""
        if not self.closed:
            try:
                if self._loop is not None:
                    self._loop.remove_reader(self.sock.fileno())
                    if self._writing:
                        self._loop.remove_writer(self.sock.fileno())
            except Exception:
                pass
            self.closed = True
            self.sock.close()
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
