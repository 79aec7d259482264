"""The `rexec` service (every rank): spawn, signal and reap local processes.

job-exec uses it to start job shells (kind "shell": a fork of the warm
spawner) and could start plain commands (kind "exec").  Each shell gets a
private directory in the broker's run directory (`tmpdir` in its info: the
batch script, a nested instance's run directories), which the spawner removes
once the shell is reaped, before the exit is reported.  `rexec.exec` is a
streaming RPC: {type: started, pid}, then {type: exited, status}, then the
end of the stream.  Processes are named by a label so they can be signalled
without knowing their pid.  SIGKILL takes a shell's whole process tree.
When the broker shuts down, its spawner kills everything it started.
"""

from __future__ import annotations

import errno
import signal

from ..errors import AlreadyExists, FluxliteError, NoService, ProtocolError, TryAgain, UsageError
from ..protocol.schema import CARRY_PAYLOAD, AnyMap, Name, Signal, Struct, Text
from .base import Service, handler


class ExecRequest(Struct, kw_only=True):
    kind: Name
    label: Name
    info: AnyMap | None = None        # kind shell: the shell's start-up information
    argv: list[Text] | None = None     # kind exec
    env: dict[str, Text] | None = None
    cwd: Text | None = None


class KillRequest(Struct, kw_only=True):
    label: Name
    signum: Signal
    tasks: bool = False


class RexecService(Service):
    name = "rexec"

    def __init__(self, ctx, *, spawner, local_uri: str, rundir: str):
        super().__init__(ctx)
        self.spawner = spawner
        self.local_uri = local_uri
        self.rundir = rundir
        self.procs: dict[str, object] = {}

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
            info["broker_rank"] = self.ctx.rank
            info["local_uri"] = self.local_uri
            info["rundir"] = self.rundir
            proc = spawner.spawn("shell", info=info, setsid=True, stdio="log",
                                 tmpdir_in=self.rundir)
        elif kind == "exec":
            if not req.argv:
                raise ProtocolError("rexec.exec: argv must be a non-empty list of strings")
            proc = spawner.spawn("exec", argv=req.argv, env=req.env, cwd=req.cwd,
                                 setsid=True, stdio="null")
        else:
            raise UsageError(f"rexec.exec: unknown kind {kind!r}")
        self.procs[label] = proc
        try:
            try:
                pid = await proc.started
            except OSError as exc:
                raise FluxliteError.from_oserror(exc) from None
            self.respond(msg, {"type": "started", "pid": pid})
            try:
                status = await proc.exited
            except OSError as exc:
                raise FluxliteError.from_oserror(exc) from None
            self.respond(msg, {"type": "exited", "pid": pid, "status": status})
            self.end_stream(msg)
        finally:
            self.procs.pop(label, None)

    @handler("rexec.kill", schema=KillRequest)
    def kill(self, msg, req):
        proc = self.procs.get(req.label)
        if proc is None:
            raise FluxliteError(f"no process labelled {req.label!r} on rank {self.ctx.rank}",
                                errno.ESRCH)
        if not 0 < req.signum < signal.NSIG:
            raise UsageError(f"invalid signal {req.signum}")
        self.spawner.kill(proc, req.signum, below=req.tasks)
        return {}

    @handler("rexec.list", schema=None)
    def list(self, msg, req):
        return {"procs": [{"label": k, "pid": p.pid, "kind": p.kind}
                          for k, p in self.procs.items()]}
