"""Pure pieces of the flux(1) utility commands: task maps (RFC 34 and its raw and
PMI forms, as flux job taskmap converts them), hostlist set operations
(flux hostlist), pgrep expressions, the text flux event sub prints."""

import pytest

from fluxlite.cli.hostlists import combine, transform
from fluxlite.cli.jobmatch import Expression
from fluxlite.cli.jobtools import parse_taskmap, taskmap_from_nodes, taskmap_nodes
from fluxlite.errors import UsageError

pytestmark = pytest.mark.timeout(30)


def test_taskmap_blocks_and_their_tasks():
    tm = {"version": 1, "map": [[0, 2, 2, 1], [2, 1, 1, 1]]}
    assert taskmap_nodes(tm) == [0, 0, 1, 1, 2]
    assert taskmap_from_nodes([0, 0, 1, 1, 2]) == tm
    # repeat: the block again, over the same nodes (a cyclic map)
    assert taskmap_nodes({"version": 1, "map": [[0, 2, 1, 2]]}) == [0, 1, 0, 1]


def test_taskmap_forms_parse_to_the_same_map():
    want = {"version": 1, "map": [[0, 2, 2, 1]]}
    assert parse_taskmap('{"version":1,"map":[[0,2,2,1]]}') == want
    assert parse_taskmap("0-1;2-3") == want
    assert parse_taskmap("(vector,(0,2,2))") == want
    for bad in ("0-1;1-2", "(vector,)", "{x", "a;b"):
        with pytest.raises(UsageError):
            parse_taskmap(bad)


def test_hostlist_set_operations():
    a, b = ["n1", "n2", "n3", "n2"], ["n2", "n4"]
    assert combine([a, b]) == ["n1", "n2", "n3", "n2", "n2", "n4"]
    assert combine([a, b], intersect=True) == ["n2"]
    assert combine([a, b], minus=True) == ["n1", "n3"]
    assert combine([a, b], xor=True) == ["n1", "n3", "n4"]


def test_hostlist_transforms():
    hosts = ["n10", "n2", "n1", "n2"]
    kw = dict(exclude=None, sort=False, unique=False, limit=None, nth=None)
    assert transform(hosts, **dict(kw, sort=True)) == ["n1", "n2", "n2", "n10"]
    assert transform(hosts, **dict(kw, unique=True)) == ["n10", "n2", "n1"]
    assert transform(hosts, **dict(kw, limit=2)) == ["n10", "n2"]
    assert transform(hosts, **dict(kw, limit=-1)) == ["n2"]
    assert transform(hosts, **dict(kw, nth="0,2")) == ["n10", "n1"]
    assert transform(hosts, **dict(kw, nth="-1")) == ["n2"]
    assert transform(hosts, **dict(kw, exclude="n2")) == ["n10", "n1"]
    assert transform(hosts, **dict(kw, exclude="0")) == ["n2", "n1", "n2"]   # an index


def test_pgrep_expressions():
    e = Expression(("name:^sl",))
    assert e.match({"id": 5, "name": "sleep"}) and not e.match({"id": 5, "name": "true"})
    r = Expression(("10..20",))
    assert r.match({"id": 15, "name": "x"}) and not r.match({"id": 21, "name": "x"})
    with pytest.raises(UsageError) as info:
        Expression(("a", "b"))
    assert info.value.exit_code == 2


def test_event_sub_text_is_fluxs():
    from fluxlite.cli.tools import _event_text
    from fluxlite.protocol.message import Message
    assert _event_text(Message.event("t", published=b'{"b": 1,  "a":2}\0')) == \
        b'{"b": 1,  "a":2}'
    assert _event_text(Message.event("t", published=b"a\tb\xff")) == b"a.b."
    # an instance's own event: its compact JSON, as Flux's jansson encodes it
    assert _event_text(Message.event("t", {"a": 1, "b": [2]})) == b'{"a":1,"b":[2]}'
    assert _event_text(Message.event("t")) == b""
