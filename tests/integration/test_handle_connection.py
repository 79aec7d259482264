"""The blocking handle makes one connection, and when its instance goes it does not
retry behind the caller's back.

A handle left open after its instance was killed (a test's handles stay open until
its teardown) used to retry the dead socket several times a second, and every try
was an event on the handle's monitor that nobody read.  After about 2000 of them
the monitor's pipe was full and the I/O thread of the ZeroMQ context that every
handle of the process shares blocked: no handle of that process could connect to
any instance any more (new handles failed with ConnectionRefused, or after the 5 s
send timeout), while other processes, the CLI, were served as before."""

import socket

import pytest
import zmq

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
