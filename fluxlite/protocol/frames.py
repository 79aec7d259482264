"""Raw multipart I/O on one ZeroMQ socket, shared by the broker's asyncio
channels and the synchronous client handle (which must not import asyncio:
it costs every CLI command ~30 ms)."""

from __future__ import annotations

import struct

import zmq

# Plain ints: pyzmq's enum constants cost an enum construction per use, and
# these run several times per message on every hop.
_EVENTS, _POLLIN = int(zmq.EVENTS), int(zmq.POLLIN)
_NOBLOCK, _SNDMORE = int(zmq.NOBLOCK), int(zmq.SNDMORE)
_SRCFD = int(zmq.SRCFD)
# libzmq's calls without pyzmq's Python-level wrappers (zmq.Socket.send only adds
# the draft routing_id/group arguments): these run for every frame on every hop.
# A frame received with copy=False says itself whether more follow; asking the
# socket (RCVMORE) costs a getsockopt and an enum lookup in pyzmq, together more
# than the Frame: ~0.25 us a frame saved, measured on a 3-frame message.
_getsockopt = zmq.backend.Socket.get
_send = zmq.backend.Socket.send
_recv = zmq.backend.Socket.recv


def has_input(sock: zmq.Socket) -> bool:
    """Whether a message is waiting (cheaper than a recv that raises Again)."""
    return _getsockopt(sock, _EVENTS) & _POLLIN != 0


def recv_frames(sock: zmq.Socket) -> list[bytes]:
    """One whole multipart message without blocking; raises zmq.Again if none."""
    frame = _recv(sock, _NOBLOCK, False)
    frames = [frame.bytes]
    while frame.more:
        frame = _recv(sock, _NOBLOCK, False)
        frames.append(frame.bytes)
    return frames


def send_frames(sock: zmq.Socket, frames: list[bytes], flags: int = _NOBLOCK) -> None:
    """One multipart message; with the default flags, raises zmq.Again rather than block."""
    more = flags | _SNDMORE
    for frame in frames[:-1]:
        _send(sock, frame, more)
    _send(sock, frames[-1], flags)


def _prop(frame, name: bytes | str, default):
    """A message property of `frame` (libzmq's metadata), or `default` without it."""
    try:
        return frame.get(name)
    except zmq.ZMQError:
        return default


def _rest(sock: zmq.Socket, frame) -> list[bytes]:
    """The bytes of `frame` and of every frame of its message that follows it."""
    frames = [frame.bytes]
    while frame.more:
        frame = _recv(sock, _NOBLOCK, False)
        frames.append(frame.bytes)
    return frames


def recv_frames_from(sock: zmq.Socket) -> tuple[list[bytes], str | None, int]:
    """As recv_frames, plus the sender's "Peer-Address" (on an ipc socket libzmq
    appends the peer's uid:gid:pid, read with SO_PEERCRED: who really sent it) and
    the descriptor of the connection it came on (-1 if unknown)."""
    frame = _recv(sock, _NOBLOCK, False)
    return _rest(sock, frame), _prop(frame, "Peer-Address", None), _prop(frame, _SRCFD, -1)


def recv_frames_auth(sock: zmq.Socket) -> tuple[list[bytes], str | None, int, str | None]:
    """As recv_frames_from, plus the "User-Id" that the socket's ZAP handler gave the
    connection's key (None if it gave none)."""
    frame = _recv(sock, _NOBLOCK, False)
    return (_rest(sock, frame), _prop(frame, "Peer-Address", None), _prop(frame, _SRCFD, -1),
            _prop(frame, "User-Id", None))


def peer_uid(peer: str | None) -> int | None:
    """The uid in an ipc "Peer-Address" ("...:uid:gid:pid"), or None if it has none."""
    if not peer:
        return None
    parts = peer.rsplit(":", 3)
    if len(parts) != 4 or not parts[1].isdigit():
        return None
    return int(parts[1])


def monitor_event(frames: list[bytes]) -> tuple[int, int]:
    """(event, value) of a message from a socket monitor (libzmq's format: a 16-bit
    event and a 32-bit value in the first frame, the endpoint in the second).
    pyzmq's parser lives in zmq.utils.monitor, which imports asyncio: ~20 ms more
    on every CLI command.  ValueError if the message is not of that shape."""
    if len(frames) != 2 or len(frames[0]) != 6:
        raise ValueError("not a socket monitor event")
    return struct.unpack("=Hi", frames[0])
