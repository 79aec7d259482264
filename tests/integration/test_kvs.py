"""The KVS through its RPCs: atomic commits, directories, watches."""

import pytest

from fluxlite.errors import FluxliteError


def test_commit_is_all_or_nothing(inst1):
    h = inst1.handle()
    h.call("kvs.commit", {"ops": [{"key": "t.b", "value": 5}]})
    v = h.call("kvs.stats")["version"]
    with pytest.raises(FluxliteError, match="not a list"):
        h.call("kvs.commit", {"ops": [{"key": "t.a", "value": 1},
                                      {"key": "t.b", "append": [1]}]})
    with pytest.raises(FluxliteError, match="not a directory"):
        h.call("kvs.commit", {"ops": [{"key": "t.x", "value": {"k": 1}},
                                      {"key": "t.x.y", "value": 1}]})
    with pytest.raises(FluxliteError, match="not found"):
        h.call("kvs.get", {"key": "t.a"})
    with pytest.raises(FluxliteError, match="not found"):
        h.call("kvs.get", {"key": "t.x"})
    assert h.call("kvs.stats")["version"] == v
    h.call("kvs.commit", {"ops": [{"key": "t.l", "append": [1]}, {"key": "t.l", "append": [2]}]})
    assert h.call("kvs.get", {"key": "t.l"})["value"] == [1, 2]
    with pytest.raises(FluxliteError, match="not a list"):
        h.call("kvs.commit", {"ops": [{"key": "t.l", "append": [3]},
                                      {"key": "t.b", "append": [3]}]})
    assert h.call("kvs.get", {"key": "t.l"})["value"] == [1, 2]


def test_dict_values_are_values(inst1):
    h = inst1.handle()
    h.call("kvs.commit", {"ops": [{"key": "d.v", "value": {"a": {"b": 1}}}]})
    assert h.call("kvs.get", {"key": "d.v"})["value"] == {"a": {"b": 1}}
    assert h.call("kvs.ls", {"key": "d"})["entries"] == ["v"]
    with pytest.raises(FluxliteError, match="is a directory"):
        h.call("kvs.get", {"key": "d"})


def test_watch_sees_changes_and_removal_of_a_parent(inst1):
    h = inst1.handle()
    h.call("kvs.commit", {"ops": [{"key": "w.dir.k", "value": 1}]})
    stream = h.stream("kvs.watch", {"key": "w.dir.k"}, timeout=10)
    assert next(stream) == {"value": 1}
    h.call("kvs.commit", {"ops": [{"key": "w.dir.k", "value": 2}]})
    assert next(stream) == {"value": 2}
    h.call("kvs.commit", {"ops": [{"key": "w.dir", "unlink": True}]})
    with pytest.raises(StopIteration):
        next(stream)  # removing the directory ends the watch (ENODATA)
    assert h.call("kvs.stats")["watchers"] == 0


def test_bad_requests(inst1):
    h = inst1.handle()
    for payload, words in (({"ops": "x"}, "ops: expected `array`, got `str`"), ({"ops": [{"value": 1}]}, "'key'"),
                           ({"ops": [{"key": "a..b", "value": 1}]}, "empty path"),
                           ({"ops": [{"key": "a"}]}, "no value")):
        with pytest.raises(FluxliteError, match=words):
            h.call("kvs.commit", payload)
    with pytest.raises(FluxliteError, match="not found"):
        h.call("kvs.watch", {"key": "nosuch"})


def test_eventlog_of_a_key_that_is_not_one(inst1):
    inst1.cli("kvs", "put", "c=hello", check=True)
    cp = inst1.cli("kvs", "eventlog", "c")
    assert cp.returncode == 1
    assert cp.stderr.strip() == ("fluxlite kvs eventlog: c is not an eventlog (a list of "
                                 "entries with a name); use `fluxlite kvs get` to read it")
    assert "resource-define" in inst1.cli("kvs", "eventlog", "resource.eventlog",
                                          check=True).stdout
