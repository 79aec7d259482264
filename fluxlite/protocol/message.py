"""The one message shape and the one codec, used on every socket.

A message travels as two ZeroMQ frames (after any ROUTER identity frame):

    frame 0  header  msgpack array
             [type, flags, topic, nodeid, matchtag, seq, errnum, errstr, userid, role, route]
    frame 1  payload msgpack bytes, or empty for no payload

Routers decode only the header and forward the payload bytes untouched; the
payload is decoded on first access at the receiving end.  `decode()` raises
ProtocolError for anything malformed, so a peer's garbage never gets past the
socket boundary.  PROTOCOL_VERSION travels in the overlay hello.
"""

from __future__ import annotations

import gc

import msgpack

from ..errors import FluxliteError, ProtocolError

PROTOCOL_VERSION = 1

# message types
REQUEST = 1
RESPONSE = 2
EVENT = 4
CONTROL = 8
TYPE_NAMES = {REQUEST: "request", RESPONSE: "response", EVENT: "event", CONTROL: "control"}

# flags
STREAMING = 0x01   # request wants many responses, ended by ENODATA
NORESPONSE = 0x02  # request wants no response at all
UPSTREAM = 0x04    # request skips services on the sender's rank (nodeid = sender's rank)
PUBLISHED = 0x08   # event whose payload is its publisher's bytes (`.published`); `.payload`
#                    is their value (published_value)
INSTANCE = 0x10    # request from the instance's own machinery (a job shell), copied into
#                    its responses: they need not wait for the state directory

# special nodeids
NODEID_ANY = 0xFFFFFFFF

# roles
ROLE_OWNER = 1
ROLE_USER = 2

_HEADER_LEN = 11
MAX_HEADER_BYTES = 64 * 1024   # a header is small: topic, numbers, a route of a few hops
MAX_ROUTE = 64                 # hops; a 1024-rank binary tree is 10 deep
MAX_TOPIC = 255
# an error's sentence: one that quotes a huge value it was given is cut here, so that
# every answer's header stays within MAX_HEADER_BYTES, which its receiver checks
MAX_ERRSTR = 4096
MAX_COUNT = 1 << 20             # nodes, slots, cores or tasks one request may ask for
_packb = msgpack.Packer(use_bin_type=True).pack


_GC_HOLD_BYTES = 4096   # a payload smaller than this builds too few containers to matter


def _unpackb(data: bytes):
    # the cyclic collector is held off while a large message is built: it has nothing
    # to collect there, and a payload of many small containers would otherwise trigger
    # full collections over the whole heap (a 1 MB frame of empty arrays: 0.4 s, not 0.1)
    if len(data) < _GC_HOLD_BYTES or not gc.isenabled():
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    gc.disable()
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    finally:
        gc.enable()


class Message:
    """A request, response, event or control message.

    `route` is the stack of hops a request has taken (each broker pushes where
    it came from); a response pops it to retrace the path.  Entries are ints
    (a child rank), -1 (the parent), or bytes (a local client's identity).
    """

    __slots__ = ("type", "flags", "topic", "nodeid", "matchtag", "seq", "errnum",
                 "errstr", "userid", "role", "route", "_payload", "_payload_raw", "_published")

    def __init__(self, type: int, topic: str, payload=None, *, nodeid: int = NODEID_ANY,
                 flags: int = 0, matchtag: int = 0, seq: int = 0, errnum: int = 0,
                 errstr: str = "", userid: int = 0, role: int = 0, route=None):
        self.type = type
        self.topic = topic
        self.nodeid = nodeid
        self.flags = flags
        self.matchtag = matchtag
        self.seq = seq
        self.errnum = errnum
        self.errstr = errstr
        self.userid = userid
        self.role = role
        self.route = [] if route is None else route
        self._payload = payload
        self._payload_raw = None
        self._published = None

    # -- payload -------------------------------------------------------
    @property
    def payload(self):
        """Decoded payload (None if empty).  Raises ProtocolError if undecodable."""
        if self._payload_raw is not None:
            raw, self._payload_raw = self._payload_raw, None
            try:
                self._payload = _unpackb(raw) if raw else None
            except Exception as exc:
                raise ProtocolError(f"undecodable payload on {self.topic!r}: {exc}") from None
            if self.flags & PUBLISHED and self.type == EVENT:
                if type(self._payload) is not bytes:
                    raise ProtocolError(f"published event {self.topic!r} without its bytes")
                self._published = self._payload
                self._payload = published_value(self._published)
        return self._payload

    @property
    def published(self) -> bytes | None:
        """A published event's payload exactly as its publisher gave it (Flux's
        message payload: a string's text ends in NUL, raw bytes do not), else None."""
        _ = self.payload   # decoding a received event sets it
        return self._published

    def drop_payload(self) -> None:
        """Forget the payload of a request kept only to be answered later (a pending
        allocation, a wait): what a response needs is its route and matchtag."""
        self._payload = self._payload_raw = self._published = None

    def payload_size(self) -> int:
        """Bytes of a payload not decoded yet (0 once decoded, or built here)."""
        return len(self._payload_raw) if self._payload_raw is not None else 0

    def payload_bytes(self) -> bytes:
        if self._payload_raw is not None:
            return self._payload_raw
        if self._published is not None:
            return _packb(self._published)
        return b"" if self._payload is None else _packb(self._payload)

    # -- constructors --------------------------------------------------
    @classmethod
    def request(cls, topic: str, payload=None, *, nodeid: int = NODEID_ANY, flags: int = 0,
                matchtag: int = 0, userid: int = 0, role: int = 0) -> Message:
        return cls(REQUEST, topic, payload, nodeid=nodeid, flags=flags, matchtag=matchtag,
                   userid=userid, role=role)

    def response(self, payload=None, errnum: int = 0, errstr: str = "") -> Message:
        """A response to this request, carrying its matchtag and route (an error's
        sentence cut to MAX_ERRSTR characters)."""
        if len(errstr) > MAX_ERRSTR:
            errstr = errstr[:MAX_ERRSTR - 30] + f"... ({len(errstr)} characters)"
        return Message(RESPONSE, self.topic, payload, nodeid=self.nodeid,
                       flags=self.flags & (STREAMING | INSTANCE), matchtag=self.matchtag,
                       errnum=errnum, errstr=errstr, userid=self.userid, role=self.role,
                       route=list(self.route))

    def error(self) -> FluxliteError | None:
        """The exception an error response stands for (its class by errno), else None."""
        return FluxliteError(self.errstr, self.errnum) if self.errnum else None

    @classmethod
    def event(cls, topic: str, payload=None, seq: int = 0,
              published: bytes | None = None) -> Message:
        """An event; with `published` (the publisher's bytes), their value is its payload."""
        if published is None:
            return cls(EVENT, topic, payload, seq=seq)
        msg = cls(EVENT, topic, published_value(published), seq=seq, flags=PUBLISHED)
        msg._published = published
        return msg

    @classmethod
    def control(cls, topic: str, payload=None) -> Message:
        return cls(CONTROL, topic, payload)

    # -- helpers -------------------------------------------------------
    @property
    def service(self) -> str:
        """The service a topic belongs to: the part before the first '.'."""
        return self.topic.partition(".")[0]

    def __repr__(self) -> str:
        kind = TYPE_NAMES.get(self.type, str(self.type))
        extra = f" err={self.errnum}" if self.errnum else ""
        return f"<Message {kind} {self.topic!r} node={self.nodeid} tag={self.matchtag}{extra}>"


def encode(msg: Message) -> list[bytes]:
    """Two frames: header and payload."""
    header = _packb([msg.type, msg.flags, msg.topic, msg.nodeid, msg.matchtag, msg.seq,
                     msg.errnum, msg.errstr, msg.userid, msg.role, msg.route])
    return [header, msg.payload_bytes()]


def decode(frames: list[bytes], max_payload: int | None = None) -> Message:
    """Parse two frames into a Message, or raise ProtocolError saying what was wrong.

    Whatever the bytes, this either returns a Message whose header fields have
    the types and ranges of section 2 of docs/protocol.md, or raises ProtocolError:
    never another exception, and never work that grows with a number a peer chose."""
    if len(frames) != 2:
        raise ProtocolError(f"expected 2 frames, got {len(frames)}")
    if len(frames[0]) > MAX_HEADER_BYTES:
        raise ProtocolError(f"header of {len(frames[0])} bytes (at most {MAX_HEADER_BYTES})")
    if max_payload is not None and len(frames[1]) > max_payload:
        raise ProtocolError(f"payload of {len(frames[1])} bytes (at most {max_payload})")
    try:
        h = _unpackb(frames[0])
    except Exception as exc:
        raise ProtocolError(f"undecodable header: {exc}") from None
    if type(h) is not list or len(h) != _HEADER_LEN:
        raise ProtocolError("header is not an array of 11 fields")
    mtype, flags, topic, nodeid, matchtag, seq, errnum, errstr, userid, role, route = h
    # one test per field, written out: a generator costs a microsecond here
    if not (type(mtype) is int and type(flags) is int and type(nodeid) is int
            and type(matchtag) is int and type(seq) is int and type(errnum) is int
            and type(userid) is int and type(role) is int and type(topic) is str
            and type(errstr) is str and type(route) is list):
        raise ProtocolError("header field of the wrong type")
    if mtype not in TYPE_NAMES:
        raise ProtocolError(f"unknown message type {mtype}")
    if not 0 <= nodeid <= NODEID_ANY or not 0 <= matchtag < (1 << 32):
        raise ProtocolError("nodeid or matchtag out of range")
    if len(topic) > MAX_TOPIC or len(route) > MAX_ROUTE:
        raise ProtocolError("topic or route too long")
    for hop in route:
        if type(hop) is int:
            if not -1 <= hop <= NODEID_ANY:
                raise ProtocolError("route entry out of range")
        elif type(hop) is not bytes or len(hop) > 255:
            raise ProtocolError("route entry of the wrong type")
    msg = Message(mtype, topic, None, nodeid=nodeid, flags=flags, matchtag=matchtag, seq=seq,
                  errnum=errnum, errstr=errstr, userid=userid, role=role, route=route)
    msg._payload_raw = bytes(frames[1])
    return msg


def pack(value) -> bytes:
    """One value in the wire codec (msgpack), e.g. for a value kept on disk."""
    return _packb(value)


def unpack(data: bytes):
    """The value `pack` made."""
    return _unpackb(data)


# Flux's event.publish request carries the event's payload as base64 of its bytes:
# a string's text with its NUL (a JSON payload), or raw bytes as they are.
def event_publish_payload(topic: str, payload=None, flags: int = 0) -> dict:
    """The payload of an `event.publish` request, as Flux's flux_event_publish sends
    it: {topic, flags, payload?}; bytes are sent as they are, a str as its text and
    anything else as its JSON text, both NUL-terminated as Flux's string payloads."""
    import base64
    import json
    out = {"topic": topic, "flags": flags}
    if payload is not None:
        raw = payload if isinstance(payload, bytes) else \
            (payload if isinstance(payload, str) else json.dumps(payload)).encode() + b"\0"
        out["payload"] = base64.b64encode(raw).decode("ascii")
    return out


def event_publish_bytes(encoded: str | None) -> bytes | None:
    """An `event.publish` request's payload bytes (ProtocolError if not base64)."""
    import base64
    import binascii
    if encoded is None:
        return None
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ProtocolError("event.publish: payload is not base64") from None


def published_value(raw: bytes):
    """The value of a published payload: the JSON value if the bytes (less a string's
    NUL) are JSON text, else the text, else the bytes."""
    import json
    try:
        text = raw.removesuffix(b"\0").decode()
    except UnicodeDecodeError:
        return raw
    try:
        return json.loads(text)
    except ValueError:
        return text
