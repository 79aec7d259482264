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

from ..errors import FluxliteError
from .base import Service, fields, request


class RexecService(Service):
    name = "rexec"

    def __init__(self, broker):
        super().__init__(broker)
        self.procs: dict[str, object] = {}

    @request("rexec.exec", streaming=True)
    async def exec_(self, msg):
        kind, label = fields(msg, kind=str, label=str)
        spawner = self.broker.spawner
        if spawner is None or spawner.closed:
            raise FluxliteError("this broker cannot start processes", errno.ENOSYS)
        if self.broker.sm.at_least("shutdown"):
            raise FluxliteError(f"rank {self.broker.rank} is shutting down", errno.EAGAIN)
        if label in self.procs:
            raise FluxliteError(f"a process labelled {label!r} already runs", errno.EEXIST)
        p = msg.payload
        if kind == "shell":
            info = p.get("info")
            if not isinstance(info, dict):
                raise FluxliteError("rexec.exec: kind shell needs info", errno.EPROTO)
            info["broker_rank"] = self.broker.rank
            info["local_uri"] = self.broker.local_uri
            info["rundir"] = self.broker.rundir
            proc = spawner.spawn("shell", info=info, setsid=True, stdio="log",
                                 tmpdir_in=self.broker.rundir)
        elif kind == "exec":
            argv = p.get("argv")
            if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
                raise FluxliteError("rexec.exec: argv must be a list of strings", errno.EPROTO)
            proc = spawner.spawn("exec", argv=argv, env=p.get("env"), cwd=p.get("cwd"),
                                 setsid=True, stdio="null")
        else:
            raise FluxliteError(f"rexec.exec: unknown kind {kind!r}", errno.EINVAL)
        self.procs[label] = proc
        try:
            try:
                pid = await proc.started
            except OSError as exc:
                raise FluxliteError(exc.strerror or str(exc), errno.ENOENT) from None
            self.respond(msg, {"type": "started", "pid": pid})
            try:
                status = await proc.exited
            except OSError as exc:
                raise FluxliteError(exc.strerror or str(exc), errno.ECHILD) from None
            self.respond(msg, {"type": "exited", "pid": pid, "status": status})
            self.end_stream(msg)
        finally:
            self.procs.pop(label, None)

    @request("rexec.kill")
    def kill(self, msg):
        label, signum = fields(msg, label=str, signum=int)
        proc = self.procs.get(label)
        if proc is None:
            raise FluxliteError(f"no process labelled {label!r} on rank {self.broker.rank}",
                                errno.ESRCH)
        if not 0 < signum < signal.NSIG:
            raise FluxliteError(f"invalid signal {signum}", errno.EINVAL)
        self.broker.spawner.kill(proc, signum, below=bool(msg.payload.get("tasks")))
        return {}

    @request("rexec.list")
    def list(self, msg):
        return {"procs": [{"label": k, "pid": p.pid, "kind": p.kind}
                          for k, p in self.procs.items()]}
