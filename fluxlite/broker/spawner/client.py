"""The broker's end of its spawner: start, signal and await local processes.

`Spawner.spawn()` sends a `spawner.spawn` request (server.py) and returns a
SpawnedProcess whose `started` future resolves to the pid and `exited` to the
wait status; a process that did not exec fails both with the error tree's class
for its errno ("ARGV0: reason").  Requests are tracked by the one RPC tracker
(a process is named by its request's matchtag); the socket is never written in
a way that blocks the event loop.  If the spawner goes away, every process it
was starting or running fails with NoChild.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable

from ...errors import EndOfStream, NoChild
from ...protocol.message import NORESPONSE, RESPONSE, ROLE_OWNER, STREAMING, Message, pack
from ...protocol.rpc import PendingRPC, RPCTracker
from ...protocol.stream import CHUNK, StreamDecoder, encode_stream, recv_chunk
from ...util.log import get_logger
from .server import KILL, KILLALL, MAX_SPAWN_PAYLOAD, SPAWN

log = get_logger("spawner")


class SpawnedProcess:
    """A process the spawner started: await `started` (pid) and `exited` (wait status)."""

    def __init__(self, rpc: PendingRPC, kind: str, on_exit: Callable[[int | None], None]):
        loop = asyncio.get_running_loop()
        self.rpc = rpc
        self.kind = kind
        self.pid: int | None = None
        self.started: asyncio.Future = loop.create_future()
        self.exited: asyncio.Future = loop.create_future()
        self._on_exit = on_exit

    @property
    def tag(self) -> int:
        """The spawn request's matchtag: how the spawner names this process."""
        return self.rpc.matchtag

    def _on_response(self, msg: Message) -> None:
        err = msg.error()
        if isinstance(err, EndOfStream):
            return
        if err is not None:
            self._fail(err)
            return
        answer = msg.payload
        if answer.get("type") == "started":
            self.pid = answer["pid"]
            if not self.started.done():
                self.started.set_result(self.pid)
        elif answer.get("type") == "exited":
            if not self.started.done():
                self.started.set_result(answer.get("pid"))
            if not self.exited.done():
                self.exited.set_result(answer["status"])
            self._on_exit(answer.get("pid"))

    def _fail(self, err: Exception) -> None:
        for fut in (self.started, self.exited):
            if not fut.done():
                fut.set_exception(err)
                fut.exception()  # mark retrieved: a caller may await only one of them


class Spawner:
    def __init__(self, sock: socket.socket, pid: int):
        self.sock = sock
        self.pid = pid
        self.tracker = RPCTracker()
        self._decoder = StreamDecoder(MAX_SPAWN_PAYLOAD)
        self._buf = bytearray(CHUNK)
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
        data = recv_chunk(self.sock, self._buf)
        if data is None:
            return
        if not data:
            self._lost("spawner exited")
            return
        try:
            messages = self._decoder.feed(data)
        except Exception as exc:   # out of step: nothing after it can be read
            log.error("spawner link unreadable", error=str(exc))
            self._lost(f"spawner link unreadable: {exc}")
            return
        for msg in messages:
            if msg.type == RESPONSE:
                self.tracker.dispatch(msg)

    def _lost(self, why: str) -> None:
        if self._loop is not None and not self.closed:
            self._loop.remove_reader(self.sock.fileno())
            if self._writing:
                self._loop.remove_writer(self.sock.fileno())
                self._writing = False
        self.closed = True
        self.tracker.fail_all(NoChild.default_errnum, why)

    def _send(self, msg: Message) -> None:
        """Queue a request; never block the event loop (the spawner may be busy sending too)."""
        if self.closed:
            raise NoChild("the spawner is gone")
        self._out += encode_stream(msg)
        self._flush()

    def _flush(self) -> None:
        while self._out:
            try:
                n = self.sock.send(self._out)
            except BlockingIOError:
                break
            except OSError:
                self._out.clear()
                self._lost("spawner exited")
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
        removed once it is reaped.  `info` (kind shell) reaches the shell as given."""
        if self.closed:
            raise NoChild("the spawner is gone")
        rpc = self.tracker.new(SPAWN, streaming=True)
        proc = SpawnedProcess(rpc, kind, self._exited)
        rpc.on_response = proc._on_response
        child = pack({"argv": argv, "env": env, "cwd": cwd, "pgid": pgid, "setsid": setsid,
                      "ctty": ctty, "stdio": stdio, "stdio_path": stdio_path, "info": info})
        try:
            self._send(Message.request(SPAWN, {"kind": kind, "tmpdir_in": tmpdir_in,
                                               "child": child},
                                       flags=STREAMING, matchtag=rpc.matchtag,
                                       role=ROLE_OWNER))
        except NoChild:
            rpc.cancel()
            raise
        return proc

    def _exited(self, pid: int | None) -> None:
        if self.on_exit is not None:
            self.on_exit(pid)

    def _tell(self, topic: str, payload: dict) -> None:
        """A request that wants no answer."""
        self._send(Message.request(topic, payload, flags=NORESPONSE, role=ROLE_OWNER))

    def kill(self, proc: SpawnedProcess, signum: int, *, below: bool = False) -> None:
        """Signal the process, or with `below` every process under it but not itself."""
        if not proc.rpc.done:
            self._tell(KILL, {"spawn": proc.tag, "signum": int(signum), "below": below})

    def killall(self) -> None:
        if not self.closed:
            try:
                self._tell(KILLALL, {})
            except NoChild:
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
