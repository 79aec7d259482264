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
handle closed (as a test's teardown does) was such an event, until a handle stopped
its monitor before closing its reader, whether closed or garbage collected."""

import asyncio
import gc
import os
import signal
import socket
import weakref

import pytest
import zmq

from fluxlite.client.aio import AsyncHandle
from fluxlite.client.connect import next_monitor_event
from fluxlite.client.sync import Handle
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
