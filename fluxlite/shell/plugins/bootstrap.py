"""bootstrap: let the tasks of a batch/alloc job find each other as brokers.

Active when the job's shell option `instance` is set (batch and alloc set it).
Each task gets a private channel (a socketpair, FLUXLITE_BOOTSTRAP_FD), its
broker rank and the instance size, and the cores it was given.  A task puts
keys (its endpoint), then fences; once every task of every shell has fenced,
each gets all the keys back.  Shells meet at the leader's `bootstrap-fence`
method.  The batch script travels in the jobspec; for task 0 the plugin
writes it to a private file and puts its path where the command says
{{script}}, so editing the script after submitting changes nothing.

The script and the brokers' run directories live in the job's private
directory (`tmpdir` in the shell's start-up information, as Flux's
{{tmpdir}}), which the broker's spawner creates for the shell and removes
once the shell is reaped: nothing is left behind even when the job is
SIGKILLed and no shell.exit runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import tempfile

from ...util import fluid, idset
from ..plugin import NO_REPLY, ShellPlugin


class Bootstrap(ShellPlugin):
    name = "bootstrap"

    def __init__(self, shell):
        super().__init__(shell)
        self.local: dict = {}
        self.waiting: list[tuple[object, socket.socket]] = []
        self.merged: dict | None = None
        self.arrived: dict[int, dict] = {}     # leader: shell rank -> its keys
        self.fence_msgs: list = []
        self.tmpdir: str | None = None
        self.socks: dict[int, socket.socket] = {}
        self.buffers: dict[int, bytes] = {}

    def methods(self) -> dict:
        return {"bootstrap-fence": self._shell_fence} if self.shell.is_leader else {}

    # ----------------------------------------------------------- per task
    def task_init(self, task) -> None:
        info = self.shell.info
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        ours.setblocking(False)
        task.pass_fds = (theirs.fileno(),)
        task.env.update({
            "FLUXLITE_BOOTSTRAP_FD": str(theirs.fileno()),
            "FLUXLITE_BOOTSTRAP_RANK": str(task.rank),
            "FLUXLITE_BOOTSTRAP_SIZE": str(self.shell.ntasks),
            "FLUXLITE_BOOTSTRAP_CORES": idset.encode(info["cores"]),
            "FLUXLITE_INSTANCE_LEVEL": str(info.get("instance_level", 0) + 1),
            "FLUXLITE_JOB_ID": fluid.f58(self.shell.jobid),
            "FLUXLITE_RUNDIR_BASE": info.get("tmpdir") or info.get("rundir", ""),
        })
        self.socks[task.rank] = ours
        task._bootstrap_theirs = theirs
        asyncio.get_running_loop().add_reader(ours.fileno(), self._readable, task.rank)

    def task_exec(self, task) -> None:
        if "{{script}}" in task.argv and task.rank == 0:
            script = self.shell.jobspec["attributes"]["system"].get("batch", {}).get("script")
            if script is not None:
                tmpdir = self.shell.info.get("tmpdir")
                if not tmpdir:  # a shell started without one: ours to remove at exit
                    tmpdir = self.tmpdir = tempfile.mkdtemp(prefix="fl-job-")
                path = os.path.join(tmpdir, "script")
                with open(path, "w") as f:
                    f.write(script)
                os.chmod(path, 0o700)
                task.argv = [path if a == "{{script}}" else a for a in task.argv]

    def shell_start(self) -> None:
        for task in self.shell.tasks:
            theirs = getattr(task, "_bootstrap_theirs", None)
            if theirs is not None:
                theirs.close()  # the task has its own copy now

    def _readable(self, rank: int) -> None:
        sock = self.socks.get(rank)
        if sock is None:
            return
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(sock.fileno())
            sock.close()
            del self.socks[rank]
            return
        buf = self.buffers.get(rank, b"") + data
        *lines, rest = buf.split(b"\n")
        self.buffers[rank] = rest
        for line in lines:
            self._request(rank, sock, line)

    def _reply(self, sock: socket.socket, obj: dict) -> None:
        try:
            sock.setblocking(True)
            sock.sendall(json.dumps(obj).encode() + b"\n")
            sock.setblocking(False)
        except OSError:
            pass

    def _request(self, rank: int, sock: socket.socket, line: bytes) -> None:
        try:
            req = json.loads(line)
            op = req["op"]
        except (ValueError, KeyError, TypeError):
            self._reply(sock, {"ok": False, "error": "malformed request"})
            return
        if op == "put":
            self.local[str(req["key"])] = req.get("value")
            self._reply(sock, {"ok": True})
        elif op == "fence":
            self.waiting.append((rank, sock))
            if len(self.waiting) == len(self.shell.tasks):
                asyncio.ensure_future(self._fence())
        else:
            self._reply(sock, {"ok": False, "error": f"unknown op {op!r}"})

    async def _fence(self) -> None:
        payload = {"shell_rank": self.shell.rank, "kvs": self.local}
        try:
            resp = await self.shell.h.call(f"{self.shell.service}.bootstrap-fence", payload,
                                           nodeid=self.shell.leader_rank)
            reply = {"ok": True, "kvs": resp["kvs"]}
        except Exception as exc:
            reply = {"ok": False, "error": f"fence failed: {exc}"}
        for _, sock in self.waiting:
            self._reply(sock, reply)
        self.waiting.clear()

    # ----------------------------------------------------------- leader
    def _shell_fence(self, payload: dict, msg):
        self.arrived[int(payload["shell_rank"])] = payload.get("kvs") or {}
        self.fence_msgs.append(msg)
        if len(self.arrived) < self.shell.nshells:
            return NO_REPLY  # answered when the last shell arrives
        merged = {}
        for kvs in self.arrived.values():
            merged.update(kvs)
        for m in self.fence_msgs[:-1]:
            self.shell.h.respond(m, {"kvs": merged})
        self.fence_msgs.clear()
        return {"kvs": merged}

    def shell_exit(self) -> None:
        for sock in self.socks.values():
            sock.close()
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
