"""The blocking handle makes one connection, and when its instance goes it does not
retry behind the caller's back.

A handle left open after its instance was killed (a test's handles stay open until
its teardown) used to retry the dead socket several times a second, and every try
was an event on the handle's monitor that nobody read.  After about 2000 of them
the monitor's pipe was full and the I/O thread of the ZeroMQ context that every
handle of the process shares blocked: no handle of that process could connect to
any instance any more (new handles failed with ConnectionRefused, or after the 5 s
send timeout), while other processes, the CLI, were served as before.

The same block came from a monitor whose reader was closed while its socket could
still report: libzmq posts monitor events from that I/O thread with a blocking send,
and one posted to a closed reader never leaves.  A closed socket lives on while it
lingers over a message its peer has not taken, so an instance killed just after a
handle closed (or was garbage collected) was such an event, until a handle stopped
its monitor before closing its reader.

Should the context stop all the same, a new handle opens in a new context."""

import asyncio
import gc
import os
import signal
import socket
import subprocess
import sys
import weakref

import pytest
import zmq

from fluxlite.client.aio import AsyncHandle
from fluxlite.client.connect import next_monitor_event
from fluxlite.client.sync import Handle, zmq_context
from fluxlite.errors import ConnectionRefused

pytestmark = pytest.mark.timeout(120)


def test_a_handle_left_open_on_a_killed_instance_stays_quiet(instance_factory):
    inst = instance_factory(1)
    h = Handle(inst.uri)
    try:
        assert h.getattr("size") == "1"
        inst.kill_broker(0)
        inst.proc.wait(timeout=60)
        # read the monitor as nobody does for a handle no longer polled: what piles up
        assert h.monitor.poll(10_000), "the end of the connection was not reported"
        assert next_monitor_event(h.monitor) == zmq.EVENT_DISCONNECTED
        # and nothing after it: a retry would be one more event every few 100 ms
        assert not h.monitor.poll(1000), \
            f"event {next_monitor_event(h.monitor):#x} after the connection ended"
    finally:
        h.close()
    # this process's handles still reach a new instance
    again = instance_factory(1)
    with Handle(again.uri) as h2:
        assert h2.getattr("size") == "1"


def test_a_socket_nobody_listens_on_is_refused_at_once(tmp_path):
    # without retries the refusal is seen as the attempt's socket closing (EVENT_CLOSED)
    path = tmp_path / "local-0"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()  # the socket file stays, as after a broker killed with SIGKILL
    with pytest.raises(ConnectionRefused, match="Connection refused"):
        Handle(f"local://{path}", connect_timeout=30)   # not after 30 s: then none is raised


def _linger_then_lose_the_instance(instance_factory, drop):
    """Handles whose last messages wait for a stopped broker are dropped (`drop`), so
    that their sockets linger, and the broker is killed meanwhile: the connection's
    end is reported while the handles are gone.  Whether libzmq has seen the reader
    go by then is a race, so there are several.  Then this process's next handle
    must reach another instance."""
    doomed = instance_factory(1)
    live = instance_factory(1)
    pid = doomed.broker_pid(0)
    # the list holds the only references, so that `drop` may let them go
    held = [Handle(doomed.uri) for _ in range(6)]
    for h in held:
        assert h.getattr("size") == "1"
    os.kill(pid, signal.SIGSTOP)
    try:
        # more than the connection's buffers hold: the rest waits in the handle's socket
        for h in held:
            h.send("log.append", {"severity": "debug", "message": "x" * (1 << 20)})
        del h
        drop(held)
    finally:
        os.kill(pid, signal.SIGKILL)
    doomed.proc.wait(timeout=60)
    with Handle(live.uri) as h2:
        assert h2.getattr("size") == "1"


def test_a_closed_handle_whose_instance_dies_while_it_lingers_blocks_no_other(
        instance_factory):
    def drop(held):
        for h in held:
            h.close()
    _linger_then_lose_the_instance(instance_factory, drop)


def test_a_handle_dropped_unclosed_whose_instance_dies_blocks_no_other(instance_factory):
    def drop(held):
        refs = [weakref.ref(h) for h in held]
        held.clear()
        gc.collect()
        assert not any(r() for r in refs), "a handle was not collected"
    _linger_then_lose_the_instance(instance_factory, drop)


async def test_an_async_handle_closed_on_a_shared_context_blocks_no_other(instance_factory):
    # as a nested broker's handles to its parent are: on the broker's own context
    doomed = instance_factory(1)
    live = instance_factory(1)
    pid = doomed.broker_pid(0)
    ctx = zmq.Context()
    try:
        handles = [await AsyncHandle(doomed.uri, ctx=ctx).connect() for _ in range(6)]
        for h in handles:
            assert (await h.call("attr.get", {"name": "size"}, timeout=30))["value"] == "1"
        os.kill(pid, signal.SIGSTOP)
        try:
            for h in handles:   # waits in the socket, which lingers after close
                h.send("log.append", {"severity": "debug", "message": "x" * (1 << 20)})
                h.close()
        finally:
            os.kill(pid, signal.SIGKILL)
        doomed.proc.wait(timeout=60)
        h = await AsyncHandle(live.uri, ctx=ctx).connect()
        try:
            reply = await asyncio.wait_for(h.call("attr.get", {"name": "size"}), 30)
            assert reply["value"] == "1"
        finally:
            h.close()
    finally:
        ctx.term()


# A context whose I/O thread is blocked all the same (by a monitor's reader closed
# while its socket reports, the mistake the handles no longer make, made on purpose):
# the next handle notices that its connection gets no answer, finds its context
# making no connection at all, and opens again in a new one.  In a process of its
# own, whose blocked threads end with it.
_STOP_THE_CONTEXT = """
import os, signal, sys, time, warnings
import zmq
from fluxlite.client.connect import context_works
from fluxlite.client.sync import Handle, zmq_context

doomed_path, doomed_pid, live_uri = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ctx = zmq_context()
sock = ctx.socket(zmq.DEALER)
sock.setsockopt(zmq.LINGER, 0)
monitor = sock.get_monitor_socket(zmq.EVENT_ALL)
sock.connect("ipc://" + doomed_path)
monitor.setsockopt(zmq.RCVTIMEO, 30_000)
while monitor.recv_multipart()[0][:2] != zmq.EVENT_CONNECTED.to_bytes(2, sys.byteorder):
    pass
monitor.close(linger=0)
os.kill(doomed_pid, signal.SIGKILL)  # its end, and every retry, is an event for nobody
deadline = time.monotonic() + 30
while context_works(ctx, 1.0):
    assert time.monotonic() < deadline, "the context did not stop"
print("stopped", flush=True)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    start = time.monotonic()
    h = Handle(live_uri)
    print("size", h.getattr("size"), "new context", h.ctx is not ctx,
          "in %.1fs" % (time.monotonic() - start), flush=True)
    print("warned", [str(w.message) for w in caught], flush=True)
os._exit(0)
"""


def test_a_handle_opens_again_in_a_new_context_when_the_shared_one_stopped(
        instance_factory):
    doomed = instance_factory(1)
    live = instance_factory(1)
    path = doomed.uri.partition("://")[2]
    cp = subprocess.run([sys.executable, "-c", _STOP_THE_CONTEXT, path,
                         str(doomed.broker_pid(0)), live.uri],
                        capture_output=True, text=True, timeout=100)
    doomed.proc.wait(timeout=60)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    lines = cp.stdout.splitlines()
    assert lines[0] == "stopped"
    assert lines[1].startswith("size 1 new context True in "), lines[1]
    assert "its I/O thread is blocked" in lines[2], lines[2]


def test_an_instance_that_does_not_answer_is_not_taken_for_a_stopped_context(
        instance_factory):
    stopped = instance_factory(1)
    pid = stopped.broker_pid(0)
    ctx = zmq_context()
    os.kill(pid, signal.SIGSTOP)
    try:
        # the connection is made (the kernel takes it) but never answered
        h = Handle(stopped.uri, connect_timeout=1)
        try:
            with pytest.raises(ConnectionRefused, match="no instance answering"):
                h.getattr("size")
            assert h.ctx is ctx and zmq_context() is ctx, "a working context was given up"
        finally:
            h.close()
    finally:
        os.kill(pid, signal.SIGCONT)
