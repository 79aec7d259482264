"""The KVS tree as rank 0's services use it (no broker): maps and logs in the store."""

import errno

import pytest

from fluxlite.errors import FluxliteError
from fluxlite.protocol import kvs as kvsv
from fluxlite.service.base import ServiceContext
from fluxlite.service.kvs import KVSService
from fluxlite.service.kvs_store import Blob, Log


@pytest.fixture
def kvs():
    ctx = ServiceContext(rank=0, size=1, owner=0, hostname="h", hosts=("h",), attrs={},
                         rpc=None, send=None, respond=lambda msg: None, publish=None,
                         state=lambda: "run", at_least=lambda s: False)
    k = KVSService(ctx)
    yield k
    k.stop()


def test_maps_live_in_the_store_and_read_back_fresh(kvs):
    spec = {"version": 1, "env": {f"VAR{i}": "/usr/local/bin:/usr/bin" for i in range(50)}}
    kvs.commit([{"key": "job.a.jobspec", "value": spec}, {"key": "job.b.jobspec", "value": spec}])
    assert isinstance(kvs._node("job.a.jobspec"), Blob)   # the heap holds only its id
    data = kvs.store.db.execute("SELECT data FROM entries WHERE log = ?",
                                (kvs._node("job.a.jobspec").id,)).fetchone()[0]
    assert len(data) < len(str(spec)) // 3   # compressed
    got = kvs.lookup("job.a.jobspec")
    assert got == spec
    got["env"]["PATH"] = "changed"   # a reader's copy is its own
    assert kvs.lookup("job.b.jobspec") == spec
    kvs.commit([{"key": "job.a.jobspec", "unlink": True}])
    assert kvs.lookup("job.b.jobspec") == spec
    kvs.commit([{"key": "job.b.jobspec", "value": 3}])   # overwritten: its row goes
    assert kvs.store.count() == 0


def test_eventlog_entries_read_back_as_appended_and_undo_on_failure(kvs):
    e1 = {"timestamp": 1.5, "name": "submit", "context": {"userid": 7}}
    e2 = {"timestamp": 2.0, "name": "validate"}
    kvs.commit([{"key": "job.a.eventlog", "append": [e1]}])
    kvs.commit([{"key": "job.a.eventlog", "append": [e2]}])
    assert kvs.lookup("job.a.eventlog") == [e1, e2]
    assert isinstance(kvs._node("job.a.eventlog"), Log)
    kvs.commit([{"key": "job.a.x", "value": 1}])
    with pytest.raises(FluxliteError) as ei:
        kvs.commit([{"key": "job.a.eventlog", "append": [e2]},
                    {"key": "job.a.x", "append": [e2]}])   # 'x' is not a list: all undone
    assert ei.value.errnum == errno.EINVAL
    assert kvs.lookup("job.a.eventlog") == [e1, e2]
    many = [{"timestamp": float(i), "name": "data"} for i in range(100)]
    kvs.commit([{"key": "job.a.eventlog", "append": many}])
    assert kvs.lookup("job.a.eventlog") == [e1, e2, *many]
    assert kvs.store.count() == 102


def test_a_list_set_as_a_value_becomes_a_log_when_appended_to(kvs):
    kvs.commit([{"key": "a.l", "value": [1, 2]}])
    assert kvs.lookup("a.l") == [1, 2]
    kvs.commit([{"key": "a.l", "append": [3]}])
    assert kvs.lookup("a.l") == [1, 2, 3] and isinstance(kvs._node("a.l"), Log)
    with pytest.raises(FluxliteError):   # a failed commit gives the list back
        kvs.commit([{"key": "a.m", "value": [1]}, {"key": "a.m", "append": [2]},
                    {"key": "a.l.x", "value": 1}, {"key": "a", "append": [0]}])
    assert not kvs.exists("a.m") and kvs.lookup("a.l") == [1, 2, 3]
    assert kvs.store.count() == 3


def test_a_text_append_sets_joins_or_extends_as_flux_s(kvs):
    def text(key, *texts):
        kvs.commit([{"key": key, "append": list(texts), "text": True}])
    text("s", "ab", "c")                    # not set: the text itself
    assert kvs.lookup("s") == "abc"
    kvs.commit([{"key": "m", "value": {"x": 1}}, {"key": "n", "value": None},
                {"key": "l", "value": [1]}, {"key": "b", "value": b"\xff"}])
    text("m", "!")                          # another value: its JSON text, then the text
    text("n", "1")
    assert (kvs.lookup("m"), kvs.lookup("n")) == ('{"x":1}!', "null1")
    assert kvs.store.count() == 0           # the map's row went with it
    text("b", "z")
    assert kvs.lookup("b") == b"\xffz"
    text("l", "2", "x", "NaN")              # a list: items, JSON where they parse
    assert kvs.lookup("l") == [1, 2, "x", "NaN"] and isinstance(kvs._node("l"), Log)
    kvs.commit([{"key": "d.k", "value": 1}])
    kvs.commit([{"key": "d.lnk", "symlink": "d.k"}])
    for key, err in (("d", errno.EISDIR), ("d.lnk", errno.EINVAL)):
        with pytest.raises(FluxliteError) as ei:   # all undone
            kvs.commit([{"key": "s", "append": ["more"], "text": True},
                        {"key": key, "append": ["x"], "text": True}])
        assert ei.value.errnum == err
    assert kvs.lookup("s") == "abc" and kvs.lookup("d.lnk") == 1
    with pytest.raises(FluxliteError) as ei:
        kvs.commit([{"key": "s", "append": [1], "text": True}])
    assert ei.value.errnum == errno.EPROTO


def test_unlink_with_prune_removes_the_directories_left_empty(kvs):
    ops = [{"key": f"job.0000.00{i}.{j}.eventlog", "append": [{"name": "submit"}]}
           for i in (1, 2) for j in ("a", "b")]
    kvs.commit(ops)
    kvs.commit([{"key": "job.0000.001.a", "unlink": True, "prune": True}])
    assert _ls(kvs, "job.0000.001") == ["b."]
    kvs.commit([{"key": "job.0000.001.b", "unlink": True, "prune": True}])
    assert _ls(kvs, "job.0000") == ["002."]   # 001 went with b
    kvs.commit([{"key": "job.0000.002.a", "unlink": True, "prune": True},
                {"key": "job.0000.002.b", "unlink": True, "prune": True}])
    assert _ls(kvs, "job") == []   # up to the top-level directory
    assert kvs.store.count() == 0
    kvs.commit([{"key": "d.x", "value": 1}])
    kvs.commit([{"key": "d.x", "unlink": True}])   # without prune: d stays, empty
    assert _ls(kvs, "d") == []


def test_a_failed_commit_puts_pruned_directories_back(kvs):
    kvs.commit([{"key": "job.a.b.eventlog", "append": [1]}, {"key": "v", "value": 1}])
    with pytest.raises(FluxliteError):
        kvs.commit([{"key": "job.a.b", "unlink": True, "prune": True},
                    {"key": "v", "append": [2]}])   # v is not a list: found while applying
    assert kvs.lookup("job.a.b.eventlog") == [1]
    assert _ls(kvs, ".") == ["job.", "v"]
    assert kvs.store.count() == 1


def _ls(kvs, key):
    """The names in directory `key`, as kvs.lookup with FLUX_KVS_READDIR answers."""
    from fluxlite.service.kvs import LookupRequest
    return kvsv.entries(kvs.lookup_rpc(None, LookupRequest(key=key, flags=kvsv.READDIR)))[0]
