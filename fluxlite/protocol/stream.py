"""Messages of the one codec over a byte stream (a Unix socket pair).

ZeroMQ keeps a message's frames together; a stream socket does not, so here each
message travels as one msgpack array of its two frames, [header, payload], and
the reader cuts the stream back into messages with msgpack's own streaming
unpacker.  `encode_stream()` and `StreamDecoder` are the two ends; the frames are
those of `message.encode()`, checked by `message.decode()`.  The broker and its
spawner talk this way.
"""

from __future__ import annotations

import msgpack

from ..errors import ProtocolError
from .message import Message, decode, encode

_packb = msgpack.Packer(use_bin_type=True).pack


def encode_stream(msg: Message) -> bytes:
    """The bytes of one message on a stream."""
    return _packb(encode(msg))


class StreamDecoder:
    """Cuts a byte stream into Messages.  `max_payload` bounds each payload; the
    unpacker's buffer is bounded by it too, so a peer never makes it grow without end."""

    def __init__(self, max_payload: int):
        self.max_payload = max_payload
        self._unpacker = msgpack.Unpacker(raw=False, max_buffer_size=max_payload + (1 << 20))

    def feed(self, data) -> list[Message]:
        """The messages `data` completes (bytes that begin the next one are kept).
        ProtocolError if the stream is not a sequence of [header, payload] arrays:
        a stream cannot be resynchronised, so the caller should drop the link."""
        try:
            self._unpacker.feed(data)
            frames = list(self._unpacker)
        except (msgpack.UnpackException, ValueError) as exc:
            raise ProtocolError(f"undecodable message stream: {exc}") from None
        out = []
        for f in frames:
            if type(f) is not list or len(f) != 2 or type(f[0]) is not bytes \
                    or type(f[1]) is not bytes:
                raise ProtocolError("message stream: expected [header, payload] frames")
            out.append(decode(f, self.max_payload))
        return out


CHUNK = 256 << 10   # bytes read at once (a recv(n) would allocate n bytes every time)


def recv_chunk(sock, buf: bytearray) -> memoryview | None:
    """What the other side sent, read into `buf` (CHUNK bytes, reused): None if
    nothing yet, empty once the other side is gone.  Valid until the next read
    into `buf`."""
    try:
        n = sock.recv_into(buf)
    except (BlockingIOError, InterruptedError):
        return None
    except OSError:
        n = 0
    return memoryview(buf)[:n]
