"""ZAP: who may connect to this broker's TCP child socket (ZeroMQ RFC 27).

A broker whose children reach it over TCP binds CURVE (its socket is a CURVE
server) and answers libzmq's authentication requests here, on
`inproc://zeromq.zap.01` in its own context: a client is accepted only if its
public key is one of the keys this instance allows (the shared certificate of a
config-booted instance, or the keys its children published through PMI).  A
refused peer is logged once per address a minute, with the address, so a
flood of bad connections cannot flood the log.

libzmq asks synchronously and waits for the answer, so the handler answers
every request at once, on the broker's event loop (no thread).
"""

from __future__ import annotations

import time

import zmq
from zmq.utils import z85

from ..protocol.transport import Channel
from ..util.log import get_logger

ZAP_ENDPOINT = "inproc://zeromq.zap.01"
DOMAIN = b"fluxlite"
_LOG_EVERY = 60.0

log = get_logger("zap")


class ZapHandler:
    def __init__(self, ctx: zmq.Context, allowed: dict[bytes, int | None]):
        """`allowed`: the Z85 public keys (40 bytes each) that may connect, each with
        the one rank that may use it, or None for a key every broker shares.  The
        answer's user id carries that rank ("rank:N"), read back from each message's
        "User-Id" so that a hello for another rank is refused."""
        self.allowed = dict(allowed)
        self.refused = 0
        self._logged: dict[bytes, float] = {}
        sock = ctx.socket(zmq.REP)
        sock.setsockopt(zmq.LINGER, 0)
        sock.bind(ZAP_ENDPOINT)
        self.channel = Channel(sock, self._on_request)

    def _on_request(self, frames: list[bytes]) -> None:
        # version, request id, domain, address, routing id, mechanism, credentials...
        if len(frames) < 6:
            reply = [b"1.0", frames[1] if len(frames) > 1 else b"", b"500", b"bad request",
                     b"", b""]
            self.channel.send(reply)
            return
        version, request_id, domain, address, _, mechanism = frames[:6]
        key = z85.encode(frames[6]) if mechanism == b"CURVE" and len(frames) > 6 \
            and len(frames[6]) == 32 else None
        ok = version == b"1.0" and domain == DOMAIN and key is not None and key in self.allowed
        if not ok:
            self.refused += 1
            self._log_refusal(address, mechanism)
        user = b""
        if ok:
            rank = self.allowed[key]
            user = b"broker" if rank is None else f"rank:{rank}".encode()
        self.channel.send([b"1.0", request_id, b"200" if ok else b"400",
                           b"OK" if ok else b"not a key of this instance", user, b""])

    def refused_handshake(self, address: str) -> None:
        """libzmq refused a peer before asking ZAP (its CURVE hello was encrypted
        to another server key: it holds another instance's certificate)."""
        self.refused += 1
        self._log_refusal(address.encode(), b"CURVE")

    def _log_refusal(self, address: bytes, mechanism: bytes) -> None:
        now = time.monotonic()
        if now - self._logged.get(address, -_LOG_EVERY) < _LOG_EVERY:
            return
        if len(self._logged) > 4096:
            self._logged.clear()
        self._logged[address] = now
        log.warning("connection refused: the peer does not hold this instance's key",
                    peer=address.decode(errors="replace"), mechanism=mechanism.decode(
                        errors="replace"), refused=self.refused)

    def close(self) -> None:
        self.channel.close(linger=0)
