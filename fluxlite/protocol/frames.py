"""Raw multipart I/O on one ZeroMQ socket, shared by the broker's asyncio
channels and the synchronous client handle (which must not import asyncio:
it costs every CLI command ~30 ms)."""

from __future__ import annotations

import struct

import zmq

# Plain ints: pyzmq's enum constants cost an enum construction per use, and
# these run several times per message on every hop.
_EVENTS, _POLLIN, _RCVMORE = int(zmq.EVENTS), int(zmq.POLLIN), int(zmq.RCVMORE)
_NOBLOCK, _SNDMORE = int(zmq.NOBLOCK), int(zmq.SNDMORE)


def has_input(sock: zmq.Socket) -> bool:
    """Whether a message is waiting (cheaper than a recv that raises Again)."""
    return bool(sock.get(_EVENTS) & _POLLIN)


def recv_frames(sock: zmq.Socket) -> list[bytes]:
    """One whole multipart message without blocking; raises zmq.Again if none."""
    frames = [sock.recv(_NOBLOCK)]
    while sock.get(_RCVMORE):
        frames.append(sock.recv(_NOBLOCK))
    return frames


def send_frames(sock: zmq.Socket, frames: list[bytes], flags: int = _NOBLOCK) -> None:
    """One multipart message; with the default flags, raises zmq.Again rather than block."""
    last = len(frames) - 1
    for i, frame in enumerate(frames):
        sock.send(frame, flags | _SNDMORE if i < last else flags)


def recv_frames_from(sock: zmq.Socket) -> tuple[list[bytes], str | None]:
    """As recv_frames, plus the sender's "Peer-Address" (on an ipc socket libzmq
    appends the peer's uid:gid:pid, read with SO_PEERCRED: who really sent it)."""
    first = sock.recv(_NOBLOCK, copy=False)
    try:
        peer = first.get("Peer-Address")
    except zmq.ZMQError:
        peer = None
    frames = [first.bytes]
    if first.more:   # the frame knows; asking the socket costs an enum lookup in pyzmq
        frames.append(sock.recv(_NOBLOCK))
        while sock.get(_RCVMORE):
            frames.append(sock.recv(_NOBLOCK))
    return frames, peer


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
