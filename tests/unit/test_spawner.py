"""The spawner: its server spoken to over the socket pair in the one codec, and the
broker's client on top of it.  Real forks and execs of small commands."""

import asyncio
import errno
import os
import select
import signal

import pytest

from fluxlite.broker.spawner import start_spawner
from fluxlite.broker.spawner.server import KILL, SPAWN
from fluxlite.errors import NoChild, NotFound
from fluxlite.protocol.message import (
    NORESPONSE,
    REQUEST,
    RESPONSE,
    ROLE_OWNER,
    STREAMING,
    Message,
    pack,
)
from fluxlite.protocol.stream import StreamDecoder, encode_stream

pytestmark = pytest.mark.timeout(60)

WAIT = 20   # seconds any one answer may take on a loaded machine


class Link:
    """The broker's end of the socket pair, read and written by hand."""

    def __init__(self, entry=None):
        self.spawner = start_spawner("fluxlite-spawner test", entry=entry)
        self.sock = self.spawner.sock
        self.sock.settimeout(WAIT)
        self.decoder = StreamDecoder(1 << 24)
        self.got: list[Message] = []
        self.tag = 0

    def send(self, topic, payload, *, flags=0, matchtag=None) -> int:
        if matchtag is None:
            self.tag += 1
            matchtag = self.tag
        self.sock.sendall(encode_stream(Message(REQUEST, topic, payload, flags=flags,
                                                matchtag=matchtag, role=ROLE_OWNER)))
        return matchtag

    def spawn(self, kind="exec", tmpdir_in=None, **child) -> int:
        return self.send(SPAWN, {"kind": kind, "tmpdir_in": tmpdir_in, "child": pack(child)},
                         flags=STREAMING)

    def recv(self) -> Message:
        while not self.got:
            data = self.sock.recv(1 << 16)
            if not data:
                raise EOFError("the spawner closed the link")
            self.got += self.decoder.feed(data)
        msg = self.got.pop(0)
        assert msg.type == RESPONSE
        return msg

    def close(self):
        self.spawner.close()


@pytest.fixture
def link():
    lk = Link()
    yield lk
    lk.close()


def _answers(link, tag, n):
    out = [link.recv() for _ in range(n)]
    assert [m.matchtag for m in out] == [tag] * n
    return out


def test_spawn_is_answered_started_exited_then_end_of_stream(link):
    tag = link.spawn(argv=["sh", "-c", "exit 3"])
    started, exited, end = _answers(link, tag, 3)
    assert started.payload["type"] == "started" and started.payload["pid"] > 0
    assert exited.payload == {"type": "exited", "pid": started.payload["pid"],
                              "status": 3 << 8}
    assert end.errnum == errno.ENODATA


def test_a_command_that_does_not_exec_is_an_error_with_its_errno(link):
    tag = link.spawn(argv=["/nonexistent/fluxlite-test-prog"])
    (answer,) = _answers(link, tag, 1)
    assert answer.errnum == errno.ENOENT
    assert answer.errstr == "/nonexistent/fluxlite-test-prog: No such file or directory"
    assert isinstance(answer.error(), NotFound)
    # the spawner carries on
    tag = link.spawn(argv=["true"])
    assert [m.errnum for m in _answers(link, tag, 3)] == [0, 0, errno.ENODATA]


def test_bad_requests_are_refused_by_the_dispatcher_and_the_spawner_carries_on(link):
    tag = link.send("spawner.nosuch", {})
    assert link.recv().errnum == errno.ENOSYS
    tag = link.send(SPAWN, {"kind": "exec"})   # no child
    (answer,) = _answers(link, tag, 1)
    assert answer.errnum == errno.EPROTO and "child" in answer.errstr
    tag = link.send(SPAWN, {"kind": "daemon", "child": pack({"argv": ["true"]})})
    (answer,) = _answers(link, tag, 1)
    assert answer.errnum and "kind" in answer.errstr
    # a child spec of the wrong shape: the child says so, and does not exec
    tag = link.send(SPAWN, {"kind": "exec", "child": pack({"argv": "true"})})
    (answer,) = _answers(link, tag, 1)
    assert answer.errnum == errno.EPROTO and "argv" in answer.errstr
    tag = link.spawn(argv=["true"])
    assert [m.errnum for m in _answers(link, tag, 3)] == [0, 0, errno.ENODATA]


def test_kill_names_the_process_by_its_spawn_request(link):
    tag = link.spawn(argv=["sleep", "30"])
    started = link.recv()
    assert started.payload["type"] == "started"
    link.send(KILL, {"spawn": tag, "signum": int(signal.SIGTERM)}, flags=NORESPONSE)
    exited, end = _answers(link, tag, 2)
    status = exited.payload["status"]
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM
    assert end.errnum == errno.ENODATA
    # a kill of a process that is gone is not answered (NORESPONSE), nor fatal
    link.send(KILL, {"spawn": tag, "signum": int(signal.SIGTERM)}, flags=NORESPONSE)
    tag = link.spawn(argv=["true"])
    assert [m.matchtag for m in _answers(link, tag, 3)] == [tag] * 3


def test_kill_below_signals_what_the_process_runs_not_itself(link, tmp_path):
    fifo = str(tmp_path / "ready")
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        tag = link.spawn(argv=["sh", "-c", f"sleep 30 & echo up > {fifo}; wait $!"])
        assert link.recv().payload["type"] == "started"
        ready, _, _ = select.select([reader], [], [], WAIT)
        assert ready and os.read(reader, 16) == b"up\n"
    finally:
        os.close(reader)
    link.send(KILL, {"spawn": tag, "signum": int(signal.SIGTERM), "below": True},
              flags=NORESPONSE)
    exited, _ = _answers(link, tag, 2)
    status = exited.payload["status"]
    # sh itself was not signalled: it saw its sleep die of SIGTERM and exited 128+15
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 128 + signal.SIGTERM


def _shell_entry(info, env, tmpdir):
    """What a "shell" process runs in these tests: report its private directory (and
    the info it was given, which the spawner passes through unread)."""
    with open(info["report"], "w") as f:
        f.write(tmpdir if os.path.isdir(tmpdir) and info == {"report": f.name} else "missing")
    return 5


def test_a_shell_gets_a_private_directory_removed_before_its_exit_is_reported(tmp_path):
    link = Link(entry=_shell_entry)
    try:
        report = tmp_path / "report"
        tag = link.spawn("shell", tmpdir_in=str(tmp_path), info={"report": str(report)})
        started, exited, end = _answers(link, tag, 3)
        assert exited.payload["status"] == 5 << 8
        private = report.read_text()
        assert os.path.dirname(private) == str(tmp_path)
        assert not os.path.exists(private)   # gone before `exited` was sent
    finally:
        link.close()


def test_a_closed_link_ends_the_spawner_and_what_it_started(link):
    link.spawn(argv=["sleep", "30"])
    pid = link.recv().payload["pid"]
    link.close()   # closes the socket, then reaps the spawner
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


# ------------------------------------------------------------------ the client
async def test_the_client_awaits_start_and_exit():
    sp = start_spawner("fluxlite-spawner test")
    exits = []
    try:
        sp.attach()
        sp.on_exit = exits.append
        proc = sp.spawn("exec", argv=["sh", "-c", "exit 7"])
        pid = await asyncio.wait_for(proc.started, WAIT)
        assert await asyncio.wait_for(proc.exited, WAIT) == 7 << 8
        assert proc.pid == pid and exits == [pid]
        assert len(sp.tracker) == 0   # the stream ended: nothing left tracked
    finally:
        sp.close()


async def test_the_client_raises_the_error_tree_class_of_a_failed_exec():
    sp = start_spawner("fluxlite-spawner test")
    try:
        sp.attach()
        proc = sp.spawn("exec", argv=["/nonexistent/fluxlite-test-prog"])
        with pytest.raises(NotFound) as info:
            await asyncio.wait_for(proc.started, WAIT)
        assert info.value.errno == errno.ENOENT and isinstance(info.value, OSError)
        with pytest.raises(NotFound):
            await proc.exited
    finally:
        sp.close()


async def test_a_lost_spawner_fails_what_it_runs_with_nochild():
    sp = start_spawner("fluxlite-spawner test")
    try:
        sp.attach()
        proc = sp.spawn("exec", argv=["sleep", "30"])
        await asyncio.wait_for(proc.started, WAIT)
        os.kill(sp.pid, signal.SIGKILL)   # its children die with it (PDEATHSIG)
        with pytest.raises(NoChild):
            await asyncio.wait_for(proc.exited, WAIT)
        assert sp.closed
        with pytest.raises(NoChild):
            sp.spawn("exec", argv=["true"])
    finally:
        sp.close()
