"""The one codec: round trips and garbage."""

import msgpack
import pytest

from fluxlite.errors import ProtocolError
from fluxlite.protocol import message as m


def test_request_roundtrip():
    req = m.Message.request("kvs.lookup", {"key": "a.b", "n": [1, 2]}, nodeid=3,
                            flags=m.STREAMING, matchtag=42, userid=1000, role=m.ROLE_OWNER)
    req.route = [b"\x00ab", 1, -1]
    back = m.decode(m.encode(req))
    assert (back.type, back.topic, back.nodeid, back.flags, back.matchtag) == \
        (m.REQUEST, "kvs.lookup", 3, m.STREAMING, 42)
    assert back.route == [b"\x00ab", 1, -1]
    assert back.payload == {"key": "a.b", "n": [1, 2]}
    assert (back.userid, back.role) == (1000, m.ROLE_OWNER)


def test_response_keeps_route_and_errors():
    req = m.Message.request("x.y", None, matchtag=7)
    req.route = [b"c", 2]
    resp = m.decode(m.encode(req.response(None, 2, "no such key")))
    assert resp.type == m.RESPONSE and resp.matchtag == 7
    assert (resp.errnum, resp.errstr, resp.route) == (2, "no such key", [b"c", 2])
    assert resp.payload is None


def test_response_keeps_the_flags_that_concern_its_sender():
    req = m.Message.request("x.y", None, flags=m.STREAMING | m.INSTANCE | m.NORESPONSE)
    assert req.response(None).flags == m.STREAMING | m.INSTANCE


def test_event_sequence():
    ev = m.decode(m.encode(m.Message.event("job-exception", {"id": 1}, seq=99)))
    assert ev.type == m.EVENT and ev.seq == 99 and ev.payload == {"id": 1}


def test_payload_forwarded_untouched():
    frames = m.encode(m.Message.request("a.b", {"big": "x" * 1000}))
    msg = m.decode(frames)
    assert msg.payload_bytes() is frames[1] or msg.payload_bytes() == frames[1]


@pytest.mark.parametrize("frames", [
    [],
    [b"garbage"],
    [b"\xc1\xc1", b""],                        # not msgpack
    [msgpack.packb({"a": 1}), b""],           # not an array
    [msgpack.packb([1, 2, 3]), b""],          # too short
    [msgpack.packb([99, 0, "t", 0, 0, 0, 0, "", 0, 0, []]), b""],       # bad type
    [msgpack.packb([1, 0, 5, 0, 0, 0, 0, "", 0, 0, []]), b""],          # topic not str
    [msgpack.packb([1, 0, "t", "x", 0, 0, 0, "", 0, 0, []]), b""],      # nodeid not int
    [msgpack.packb([1, 0, "t", 0, 0, 0, 0, "", 0, 0, [1.5]]), b""],     # bad route hop
    [msgpack.packb([1, 0, "t", 0, 0, 0, 0, "", 0, 0, []]), b"", b"x"],  # extra frame
])
def test_garbage_is_protocol_error(frames):
    with pytest.raises(ProtocolError):
        m.decode(frames)


def test_undecodable_payload_raises_on_access():
    msg = m.decode([msgpack.packb([1, 0, "t.x", 0, 0, 0, 0, "", 0, 0, []]), b"\xc1"])
    with pytest.raises(ProtocolError):
        _ = msg.payload


def test_published_event_keeps_its_bytes_and_gives_their_value():
    for raw, value in ((b'{"b": 1,  "a":2}\0', {"b": 1, "a": 2}), (b"words", "words"),
                       (b"\xff\x01", b"\xff\x01")):
        ev = m.Message.event("t.x", seq=3, published=raw)
        for msg in (ev, m.decode(m.encode(ev))):
            assert (msg.flags, msg.published, msg.payload) == (m.PUBLISHED, raw, value)
    internal = m.decode(m.encode(m.Message.event("t.y", {"a": 1})))
    assert (internal.published, internal.payload) == (None, {"a": 1})
    bad = m.Message.event("t.z", {"a": 1})
    bad.flags = m.PUBLISHED
    with pytest.raises(ProtocolError):
        _ = m.decode(m.encode(bad)).payload


def test_event_publish_payload_ends_text_in_nul_as_flux():
    import base64
    as_sent = [base64.b64decode(m.event_publish_payload("t", p)["payload"])
               for p in ({"a": 1}, "text", b"\xff")]
    assert as_sent == [b'{"a": 1}\0', b"text\0", b"\xff"]
    assert m.published_value(as_sent[0]) == {"a": 1}
