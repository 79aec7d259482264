"""The `rexec` service (every rank): spawn, signal and reap local processes.

job-exec uses it to start job shells (kind "shell": a fork of the warm
spawner, given its ShellInfo, checked here, fluxlite/job/shell_info.py) and
could start plain commands (kind "exec").  Each shell gets a private directory
in the broker's run directory (the batch script, a nested instance's run
directories), which the spawner removes once the shell is reaped, before the
exit is reported.  `rexec.exec` is a streaming RPC: {type: started, pid},
then {type: exited, status}, then the end of the stream.  A command started
with `output` (kind exec: `fluxlite exec`) also streams what it writes,
{type: output, stream: stdout|stderr, data}, all of it before `exited`, and
reads what `rexec.write` sends it ({label, data, eof}); a client that goes
away takes its command with it.
Processes are named by a label so they can be signalled without knowing
their pid.  SIGKILL takes a shell's whole process tree.
When the broker shuts down, its spawner kills everything it started.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import os
import signal
import socket

from ..errors import (
    AlreadyExists,
    FluxliteError,
    NoService,
    NoSuchProcess,
    ProtocolError,
    TryAgain,
    UsageError,
)
from ..job.shell_info import ShellInfo
from ..protocol.schema import CARRY_PAYLOAD, Name, Seq, Signal, Struct, Text
from .base import Service, handler


async def _outcome(future):
    """A spawned process's start or exit, its OSError turned into the error tree's."""
    try:
        return await future
    except OSError as exc:
        raise FluxliteError.from_oserror(exc) from None


class ExecRequest(Struct, kw_only=True):
    kind: Name
    label: Name
    info: ShellInfo | None = None     # kind shell: the shell's start-up information
    argv: list[Text] | None = None     # kind exec
    env: dict[str, Text] | None = None
    cwd: Text | None = None
    output: bool = False               # kind exec: stream its stdout/stderr, take rexec.write


class WriteRequest(Struct, kw_only=True):
    label: Name
    data: bytes = b""
    eof: bool = False


class WaitDurableRequest(Struct, kw_only=True):
    write_out: Seq


class SignalLabelRequest(Struct, kw_only=True):
    """Signal the command run under `label` (and its tasks' process groups with tasks)."""
    label: Name
    signum: Signal
    tasks: bool = False


class RexecService(Service):
    name = "rexec"
    busy = "it runs this broker's job shells and processes"

    def __init__(self, ctx, *, spawner, local_uri: str, rundir: str, durable=None):
        super().__init__(ctx)
        # the broker's links: which write-out of the state directory holds what is known
        # now (write_out) and when it is on disk (durable)
        self.durable = durable
        self.spawner = spawner
        self.local_uri = local_uri
        self.rundir = rundir
        self.procs: dict[str, object] = {}
        # label -> its stdin (output commands), and a lock that keeps writes in order
        self.stdin: dict[str, tuple[socket.socket, asyncio.Lock]] = {}
        self._serial = itertools.count()

    @handler("rexec.exec", schema=ExecRequest, streaming=True, max_payload=CARRY_PAYLOAD)
    async def exec_(self, msg, req):
        kind, label = req.kind, req.label
        spawner = self.spawner
        if spawner is None or spawner.closed:
            raise NoService("this broker cannot start processes")
        if self.ctx.at_least("shutdown"):
            raise TryAgain(f"rank {self.ctx.rank} is shutting down")
        if label in self.procs:
            raise AlreadyExists(f"a process labelled {label!r} already runs")
        if kind == "shell":
            info = req.info
            if info is None:
                raise ProtocolError("rexec.exec: kind shell needs info")
            if info.broker_rank != self.ctx.rank:
                raise UsageError(f"rexec.exec: info.ranks[{info.shell_rank}] is "
                                 f"{info.broker_rank}, not this broker's rank {self.ctx.rank}")
            # the job's alloc is in memory: its tasks wait for the write-out it is in
            wo = self.durable.write_out() if self.durable is not None else 0
            # the spawner hands the record to the shell as it is, unread
            proc = spawner.spawn("shell", info=info.with_local_uri(self.local_uri, wo).encode(),
                                 setsid=True, stdio="log", tmpdir_in=self.rundir)
        elif kind == "exec":
            if not req.argv:
                raise ProtocolError("rexec.exec: argv must be a non-empty list of strings")
            if req.output:
                return await self._exec_output(msg, req)
            proc = spawner.spawn("exec", argv=req.argv, env=req.env, cwd=req.cwd,
                                 setsid=True, stdio="null")
        else:
            raise UsageError(f"rexec.exec: unknown kind {kind!r}")
        self.procs[label] = proc
        try:
            pid = await _outcome(proc.started)
            self.respond(msg, {"type": "started", "pid": pid})
            status = await _outcome(proc.exited)
            self.respond(msg, {"type": "exited", "pid": pid, "status": status})
            self.end_stream(msg)
        finally:
            self.procs.pop(label, None)

    async def _exec_output(self, msg, req):
        """A command whose stdin, stdout and stderr travel in messages."""
        loop = asyncio.get_running_loop()
        base = os.path.join(self.rundir, f"x{self.ctx.rank}.{next(self._serial)}.")
        listeners = []
        ends: list[socket.socket] = []
        proc = None
        try:
            for suffix in ("o", "e"):
                lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                listeners.append(lsock)
                try:
                    lsock.bind(base + suffix)
                except OSError as exc:
                    raise FluxliteError.from_oserror(exc, "cannot make the command's "
                                                          "output socket") from None
                lsock.listen(1)
                lsock.setblocking(False)
            env = req.env
            if env is not None and "FLUXLITE_URI" in env:
                env = {**env, "FLUXLITE_URI": self.local_uri}   # this rank's broker
            proc = self.spawner.spawn("exec", argv=req.argv, env=env, cwd=req.cwd,
                                      setsid=True, stdio="connect", stdio_path=base)
            self.procs[req.label] = proc
            self.track_stream(msg, lambda: self.spawner.kill(proc, signal.SIGKILL))
            pid = await _outcome(proc.started)
            # the child connected before it exec'd: both are waiting in the backlog
            for lsock in listeners:
                conn, _ = await loop.sock_accept(lsock)
                conn.setblocking(False)
                ends.append(conn)
            self.stdin[req.label] = (ends[0], asyncio.Lock())
            self.respond(msg, {"type": "started", "pid": pid})
            await asyncio.gather(self._pump(msg, ends[0], "stdout"),
                                 self._pump(msg, ends[1], "stderr"))
            status = await _outcome(proc.exited)
            self.respond(msg, {"type": "exited", "pid": pid, "status": status})
            self.end_stream(msg)
        finally:
            self.untrack_stream(msg)
            self.procs.pop(req.label, None)
            self.stdin.pop(req.label, None)
            for sock in listeners + ends:
                sock.close()
            for suffix in ("o", "e"):
                try:
                    os.unlink(base + suffix)
                except OSError:
                    pass
            if proc is not None and not proc.exited.done():
                self.spawner.kill(proc, signal.SIGKILL)

    async def _pump(self, msg, sock: socket.socket, stream: str) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                data = await loop.sock_recv(sock, 64 << 10)
            except OSError:
                return
            if not data:
                return
            self.respond(msg, {"type": "output", "stream": stream, "data": data})

    @handler("rexec.write", schema=WriteRequest)
    async def write(self, msg, req):
        """Input for a command started with `output`; `eof` closes its stdin."""
        entry = self.stdin.get(req.label)
        if entry is None:
            raise NoSuchProcess(f"no command labelled {req.label!r} takes input on rank "
                                f"{self.ctx.rank}")
        sock, lock = entry
        try:
            async with lock:
                if req.data:
                    await asyncio.get_running_loop().sock_sendall(sock, req.data)
                if req.eof:
                    sock.shutdown(socket.SHUT_WR)
        except OSError as exc:
            if exc.errno != errno.EPIPE:   # a command that stopped reading is no error
                raise FluxliteError.from_oserror(exc) from None
        return {}

    @handler("rexec.kill", schema=SignalLabelRequest)
    def kill(self, msg, req):
        proc = self.procs.get(req.label)
        if proc is None:
            raise NoSuchProcess(f"no process labelled {req.label!r} on rank {self.ctx.rank}")
        if not 0 < req.signum < signal.NSIG:
            raise UsageError(f"invalid signal {req.signum}")
        self.spawner.kill(proc, req.signum, below=req.tasks)
        return {}

    @handler("rexec.wait-durable", schema=WaitDurableRequest)
    async def wait_durable(self, msg, req):
        """A job shell's tasks start once the job's alloc is on disk (ShellInfo.durable):
        a restart after a crash then ends the job rather than running it again."""
        if self.durable is not None:
            await self.durable.durable(req.write_out)
        return {}

    @handler("rexec.list", schema=None)
    def list(self, msg, req):
        return {"procs": [{"label": k, "pid": p.pid, "kind": p.kind}
                          for k, p in self.procs.items()]}
