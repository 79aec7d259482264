"""Where a client connects and who it says it is.

FLUXLITE_URI selects the instance: `local://<rundir>/local-<rank>` (an ipc
socket on this machine) or `ipc://` / `tcp://` endpoints as ZeroMQ spells
them.  Inside a job it points at the enclosing instance.

A client's messages carry its uid for the record, but the broker does not take
its word for it: the local endpoint replaces userid and role with what the
connection itself says (see fluxlite/router/local.py).
"""

from __future__ import annotations

import errno
import itertools
import os
import time

import zmq

from ..errors import ConnectionRefused, NotFound, UsageError
from ..protocol.frames import monitor_event
from ..protocol.message import ROLE_OWNER

ENV_URI = "FLUXLITE_URI"


def resolve_uri(uri: str | None = None) -> str:
    """The ZeroMQ endpoint for `uri` (default: $FLUXLITE_URI); a clear error if none."""
    uri = uri or os.environ.get(ENV_URI)
    if not uri:
        raise NotFound("no instance: FLUXLITE_URI is not set (run inside `fluxlite start`, "
                       "or set FLUXLITE_URI to an instance's local-uri)")
    if uri.startswith(("local://", "ipc://")):
        path = uri.partition("://")[2]
        _check_listening(uri, path)
        return "ipc://" + path
    if uri.startswith("tcp://"):
        if not uri[len("tcp://"):]:
            raise UsageError(f"invalid URI {uri!r}: expected tcp://HOST:PORT")
        return uri
    raise UsageError(f"unsupported URI {uri!r}: expected local://PATH, ipc://PATH or "
                     "tcp://HOST:PORT")


def not_a_client_socket(uri: str) -> str:
    return (f"{uri} is not a local (client) socket of a broker: use the instance's "
            "local-uri (`fluxlite getattr local-uri`), local://RUNDIR/local-RANK")


def _check_listening(uri: str, path: str) -> None:
    """Fail at once, with the reason, if there is no local socket at a path, or if the
    path is a broker's tree socket (tbon-RANK), where clients are not served.  Whether
    something listens there is told by the handle's own connection (see
    await_connection), not by a probe the broker would see come and go."""
    if not path:
        raise UsageError(f"invalid URI {uri!r}: no socket path (expected "
                         "local://RUNDIR/local-RANK)")
    if os.path.basename(path).startswith("tbon-"):
        raise UsageError(not_a_client_socket(uri))
    if not os.path.exists(path):
        raise NotFound(f"no instance at {uri}: {path} does not exist")


# what a client socket's monitor reports: connected, refused (the attempt's socket
# closed), lost.  A handle makes one connection and never retries (see sync.Handle),
# so these are at most three events in its life, whether or not anyone reads them.
MONITOR_EVENTS = zmq.EVENT_CONNECTED | zmq.EVENT_CLOSED | zmq.EVENT_DISCONNECTED


def next_monitor_event(monitor) -> int:
    """The next event of a socket monitor (one of MONITOR_EVENTS)."""
    return monitor_event(monitor.recv_multipart())[0]


def close_monitored(sock: zmq.Socket, monitor: zmq.Socket, linger: int | None = None) -> None:
    """Close a socket and the reader of its monitor, in the one safe order: stop the
    monitor, close the reader, close the socket (`linger` ms, default its LINGER).

    libzmq posts a monitor's events from the context's I/O thread, with a blocking
    send that has no timeout.  Once the reader is closed, the next event blocks that
    thread for good, and with it every socket of the context: no handle of the
    process connects anywhere again.  Closing the socket first is no cure: a closed
    socket lives on while it lingers (a message still queued for a stopped peer),
    and its peer's end (the instance killed) is an event.  Stopping the monitor
    (zmq_socket_monitor with no endpoint) is synchronous: once it returns, nothing
    more is posted."""
    if not sock.closed:
        try:
            sock.disable_monitor()
        except zmq.ZMQError:
            pass        # the context is terminated: nothing is posted any more
    monitor.close(linger=0)
    if not sock.closed:
        sock.close(linger=linger)


def await_connection(monitor, uri: str, timeout: float) -> bool:
    """Wait for a local (ipc) socket's connection, which ZeroMQ makes at once or
    refuses at once: a clear error if it is refused (nothing listens: the instance
    has exited).  True when connected; False after `timeout` without an answer
    (the first send then says so)."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        if not monitor.poll(int(left * 1000) + 1):
            return False
        event = next_monitor_event(monitor)
        if event == zmq.EVENT_CONNECTED:
            return True
        if event == zmq.EVENT_CLOSED:
            raise ConnectionRefused(f"no instance at {uri}: "
                                    f"{os.strerror(errno.ECONNREFUSED)} (has it exited?)")
    return False


# names of this process's monitor endpoints and context probes.  pyzmq names a
# monitor after its socket's descriptor, which is reused as soon as a closed socket
# is gone, while the name may still be bound a moment longer (binding it again fails)
_names = itertools.count()


def monitor_address() -> str:
    return f"inproc://fluxlite-monitor-{next(_names)}"


def context_works(ctx: zmq.Context, timeout: float = 1.0) -> bool:
    """Whether a context's I/O thread still makes connections: a pair of sockets of
    its own, on a local socket, must pass one message within `timeout` (a working
    one does in a millisecond).  Asked only when a connection got no answer, to tell
    a context that stopped from an instance that does not answer."""
    endpoint = f"ipc://@fluxlite-probe-{os.getpid()}-{next(_names)}"  # abstract: no file
    deadline = time.monotonic() + timeout
    server, client = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    try:
        for sock in (server, client):
            sock.setsockopt(zmq.LINGER, 0)
        client.setsockopt(zmq.IMMEDIATE, 1)
        client.setsockopt(zmq.SNDTIMEO, max(1, int(timeout * 1000)))
        server.bind(endpoint)
        client.connect(endpoint)
        client.send(b"probe")   # waits for the connection: the I/O thread makes it
        return bool(server.poll(max(1, int((deadline - time.monotonic()) * 1000))))
    except zmq.ZMQError:
        return False
    finally:
        server.close()
        client.close()


def credentials() -> tuple[int, int]:
    """(userid, role) written on outgoing messages; the broker replaces both."""
    return os.getuid(), ROLE_OWNER
