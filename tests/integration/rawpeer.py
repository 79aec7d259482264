"""A raw ZeroMQ peer for attack tests: it speaks (or breaks) the wire protocol by hand.

fluxlite's own handles always send well-formed messages and stamp honest
credentials; an attacker does neither.  RawPeer connects a DEALER to a broker's
local or tbon socket and sends whatever frames it is given, so the tests can
forge headers, responses, hellos and garbage exactly as a hostile process would.
"""

from __future__ import annotations

import os
import time

import zmq

from fluxlite.protocol import message as m
from fluxlite.protocol.message import Message


def rss_kib(pid: int) -> int:
    """Resident set size of a process, in KiB (from /proc)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


def header(mtype=m.REQUEST, flags=0, topic="broker.ping", nodeid=m.NODEID_ANY, matchtag=1,
           seq=0, errnum=0, errstr="", userid=None, role=m.ROLE_OWNER, route=None) -> bytes:
    """A header frame with any field chosen by the caller (types are not checked)."""
    fields = [mtype, flags, topic, nodeid, matchtag, seq, errnum, errstr,
              os.getuid() if userid is None else userid, role, [] if route is None else route]
    return m._packb(fields)


class RawPeer:
    def __init__(self, endpoint: str, *, rcvhwm: int = 0, rcvbuf: int | None = None,
                 identity: bytes | None = None):
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.SNDHWM, 0)
        self.sock.setsockopt(zmq.RCVHWM, rcvhwm)
        if rcvbuf is not None:
            self.sock.setsockopt(zmq.RCVBUF, rcvbuf)
        if identity is not None:
            self.sock.setsockopt(zmq.IDENTITY, identity)
        self.sock.connect(endpoint)

    def send(self, frames: list[bytes]) -> None:
        self.sock.send_multipart(frames)

    def send_msg(self, msg: Message) -> None:
        self.send(m.encode(msg))

    def recv(self, timeout: float) -> list[bytes] | None:
        """The next message's frames, or None if none came within `timeout`."""
        if self.sock.poll(int(timeout * 1000), zmq.POLLIN):
            return self.sock.recv_multipart()
        return None

    def recv_msg(self, timeout: float) -> Message | None:
        frames = self.recv(timeout)
        return None if frames is None else m.decode(frames)

    def call(self, topic: str, payload=None, *, nodeid=m.NODEID_ANY, timeout: float = 10,
             **fields) -> Message:
        """Send one request (header fields as given) and return its response."""
        tag = fields.pop("matchtag", int(time.monotonic_ns() & 0xFFFFFF))
        body = b"" if payload is None else m._packb(payload)
        self.send([header(topic=topic, nodeid=nodeid, matchtag=tag, **fields), body])
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            msg = self.recv_msg(max(0.0, left))
            if msg is None:
                raise AssertionError(f"{topic}: no response within {timeout}s")
            if msg.type == m.RESPONSE and msg.matchtag == tag:
                return msg

    def close(self) -> None:
        self.sock.close(linger=0)
        self.ctx.term()

    def __enter__(self) -> RawPeer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def local_endpoint(inst, rank: int = 0) -> str:
    return "ipc://" + inst.getattr("local-uri", rank).removeprefix("local://")


def tbon_endpoint(inst, rank: int = 0) -> str:
    ep = inst.getattr("tbon.endpoint", rank)
    assert ep, f"rank {rank} has no children, so no tbon socket"
    return ep
