"""The KVS tree as rank 0's services use it (no broker): values kept encoded."""

import errno

import pytest

from fluxlite.errors import FluxliteError
from fluxlite.service.base import ServiceContext
from fluxlite.service.kvs import KVSService


@pytest.fixture
def kvs():
    ctx = ServiceContext(rank=0, size=1, owner=0, hostname="h", attrs={},
                         rpc=None, send=None, respond=lambda msg: None, publish=None,
                         state=lambda: "run", at_least=lambda s: False)
    k = KVSService(ctx)
    yield k
    k.stop()


def test_maps_are_kept_small_and_read_back_fresh(kvs):
    spec = {"version": 1, "env": {f"VAR{i}": "/usr/local/bin:/usr/bin" for i in range(50)}}
    kvs.commit([{"key": "job.a.jobspec", "value": spec}, {"key": "job.b.jobspec", "value": spec}])
    assert len(kvs._node("job.a.jobspec").data) < len(str(spec)) // 3
    got = kvs.lookup("job.a.jobspec")
    assert got == spec
    got["env"]["PATH"] = "changed"   # a reader's copy is its own
    assert kvs.lookup("job.b.jobspec") == spec
    kvs.commit([{"key": "job.a.jobspec", "unlink": True}])
    assert kvs.lookup("job.b.jobspec") == spec


def test_eventlog_entries_read_back_as_appended_and_undo_on_failure(kvs):
    e1 = {"timestamp": 1.5, "name": "submit", "context": {"userid": 7}}
    e2 = {"timestamp": 2.0, "name": "validate"}
    kvs.commit([{"key": "job.a.eventlog", "append": [e1]}])
    kvs.commit([{"key": "job.a.eventlog", "append": [e2]}])
    assert kvs.lookup("job.a.eventlog") == [e1, e2]
    kvs.commit([{"key": "job.a.x", "value": 1}])
    with pytest.raises(FluxliteError) as ei:
        kvs.commit([{"key": "job.a.eventlog", "append": [e2]},
                    {"key": "job.a.x", "append": [e2]}])   # 'x' is not a list: all undone
    assert ei.value.errnum == errno.EINVAL
    assert kvs.lookup("job.a.eventlog") == [e1, e2]
    many = [{"timestamp": float(i), "name": "data"} for i in range(100)]
    kvs.commit([{"key": "job.a.eventlog", "append": many}])   # long: moved to the store
    assert kvs.lookup("job.a.eventlog") == [e1, e2, *many]
