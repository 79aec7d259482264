"""The KVS through its RPCs: atomic commits, directories, watches; and through the
CLI: kvs ls -R, dir, unlink, and bad input that changes nothing."""

import pytest

from fluxlite.errors import FluxliteError
from fluxlite.protocol import kvs as kvsv


def ls(h, payload, **kw) -> list[str]:
    """A directory's names (kvs.lookup with FLUX_KVS_READDIR)."""
    return kvsv.entries(h.call("kvs.lookup", {**payload, "flags": kvsv.READDIR}, **kw))[0]



def test_commit_is_all_or_nothing(inst1):
    h = inst1.handle()
    h.call("kvs.commit", {"ops": [{"key": "t.b", "value": 5}]})
    v = h.call("kvs.stats")["version"]
    with pytest.raises(FluxliteError, match="not a list"):
        h.call("kvs.commit", {"ops": [{"key": "t.a", "value": 1},
                                      {"key": "t.b", "append": [1]}]})
    with pytest.raises(FluxliteError, match="is a directory: cannot append"):
        h.call("kvs.commit", {"ops": [{"key": "t.x", "value": {"k": 1}},
                                      {"key": "t.x.y", "value": 1},   # t.x: a directory now
                                      {"key": "t.x", "append": [1]}]})
    with pytest.raises(FluxliteError, match="not found"):
        h.call("kvs.lookup", {"key": "t.a"})
    with pytest.raises(FluxliteError, match="not found"):
        h.call("kvs.lookup", {"key": "t.x"})
    assert h.call("kvs.stats")["version"] == v
    h.call("kvs.commit", {"ops": [{"key": "t.l", "append": [1]}, {"key": "t.l", "append": [2]}]})
    assert kvsv.value(h.call("kvs.lookup", {"key": "t.l"})) == [1, 2]
    with pytest.raises(FluxliteError, match="not a list"):
        h.call("kvs.commit", {"ops": [{"key": "t.l", "append": [3]},
                                      {"key": "t.b", "append": [3]}]})
    assert kvsv.value(h.call("kvs.lookup", {"key": "t.l"})) == [1, 2]


def test_dict_values_are_values(inst1):
    h = inst1.handle()
    h.call("kvs.commit", {"ops": [{"key": "d.v", "value": {"a": {"b": 1}}}]})
    assert kvsv.value(h.call("kvs.lookup", {"key": "d.v"})) == {"a": {"b": 1}}
    assert ls(h, {"key": "d"}) == ["v"]
    with pytest.raises(FluxliteError, match="is a directory"):
        h.call("kvs.lookup", {"key": "d"})


def test_watch_sees_changes_and_removal_of_a_parent(inst1):
    h = inst1.handle()
    h.call("kvs.commit", {"ops": [{"key": "w.dir.k", "value": 1}]})
    stream = h.stream("kvs-watch.lookup", {"key": "w.dir.k", "flags": kvsv.WATCH}, timeout=10)
    assert kvsv.value(next(stream)) == 1
    h.call("kvs.commit", {"ops": [{"key": "w.dir.k", "value": 2}]})
    assert kvsv.value(next(stream)) == 2
    h.call("kvs.commit", {"ops": [{"key": "w.dir", "unlink": True}]})
    with pytest.raises(StopIteration):
        next(stream)  # removing the directory ends the watch (ENODATA)
    assert h.call("kvs.stats")["watchers"] == 0


def test_bad_requests(inst1):
    h = inst1.handle()
    for payload, words in (({"ops": "x"}, "ops: expected `array`, got `str`"),
                           ({"ops": [{"value": 1}]}, "'key'"),
                           ({"ops": [{"key": "a..b", "value": 1}]}, "empty path"),
                           ({"ops": [{"key": "a"}]}, "no value")):
        with pytest.raises(FluxliteError, match=words):
            h.call("kvs.commit", payload)
    with pytest.raises(FluxliteError, match="not found"):
        next(h.stream("kvs-watch.lookup", {"key": "nosuch", "flags": kvsv.WATCH}, timeout=10))


def test_eventlog_of_a_key_that_is_not_one(inst1):
    inst1.cli("kvs", "put", "c=hello", check=True)
    cp = inst1.cli("kvs", "eventlog", "get", "c")
    assert cp.returncode == 1
    assert cp.stderr.strip() == ("fluxlite kvs eventlog: c is not an eventlog (a list of "
                                 "entries with a name); use `fluxlite kvs get` to read it")
    assert "resource-define" in inst1.cli("kvs", "eventlog", "get", "resource.eventlog",
                                          check=True).stdout


def test_long_lists_live_in_the_on_disk_store(inst1):
    """A list that grows long moves to <rundir>/content.sqlite (owner-only); get, watch,
    a failed commit and unlink behave exactly as for a list in memory."""
    import os
    import stat
    h = inst1.handle()
    path = os.path.join(inst1.getattr("rundir"), "content.sqlite")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    before = h.call("kvs.stats")["store_entries"]
    h.call("kvs.commit", {"ops": [{"key": "s.log", "append": [0, 1]}]})
    stream = h.stream("kvs-watch.lookup", {"key": "s.log",
                                           "flags": kvsv.WATCH | kvsv.WATCH_APPEND},
                      timeout=10)
    assert kvsv.value(next(stream)) == [0, 1]
    h.call("kvs.commit", {"ops": [{"key": "s.log", "append": list(range(2, 3000))}]})
    assert h.call("kvs.stats")["store_entries"] == before + 3000
    got = []
    while len(got) < 2998:
        got += kvsv.value(next(stream))
    assert got == list(range(2, 3000))
    big = "x" * 10000  # one large entry goes to disk at once
    h.call("kvs.commit", {"ops": [{"key": "s.big", "append": [{"data": big}]}]})
    assert h.call("kvs.stats")["store_entries"] == before + 3001
    with pytest.raises(FluxliteError, match="not a list"):
        h.call("kvs.commit", {"ops": [{"key": "s.log", "append": ["lost"]},
                                      {"key": "s.big", "unlink": True},
                                      {"key": "s.v", "value": 1},
                                      {"key": "s.v", "append": [1]}]})
    assert kvsv.value(h.call("kvs.lookup", {"key": "s.log"})) == list(range(3000))
    assert kvsv.value(h.call("kvs.lookup", {"key": "s.big"})) == [{"data": big}]
    h.call("kvs.commit", {"ops": [{"key": "s.log", "append": [3000]}]})
    assert kvsv.value(next(stream)) == [3000]
    h.call("kvs.commit", {"ops": [{"key": "s", "unlink": True}]})
    with pytest.raises(StopIteration):
        next(stream)
    assert h.call("kvs.stats")["store_entries"] == before


# ------------------------------------------- kvs ls -R, dir, unlink through the CLI


@pytest.fixture
def tree(inst1):
    inst1.cli("kvs", "put", "a.b=1", "a.c.d=hello", "a.c.e.f=[1,2]", "top=x", check=True)
    return inst1


def test_kvs_ls_recursive_as_ls_R(tree):
    out = tree.cli("kvs", "ls", "-R", "-1F", "a", check=True).stdout
    assert out == "a:\nb\nc.\n\na.c:\nd\ne.\n\na.c.e:\nf\n"
    root = tree.cli("kvs", "ls", "-R", "-1F", check=True).stdout
    assert root.startswith(".:\na.\n") and "\n\na.c.e:\nf\n" in root
    assert tree.cli("kvs", "ls", "-1F", "a", check=True).stdout == "b\nc.\n"
    # as Flux: names in columns, no marks without -F
    assert tree.cli("kvs", "ls", "-w", "80", "a", check=True).stdout == "b    c\n"


def test_kvs_dir_prints_keys_and_values(tree):
    assert tree.cli("kvs", "dir", "a", check=True).stdout == "a.b = 1\na.c.\n"
    assert tree.cli("kvs", "dir", "-R", "a", check=True).stdout == \
        "a.b = 1\na.c.d = hello\na.c.e.f = [1, 2]\n"
    assert tree.cli("kvs", "dir", "-R", "-d", "a.c", check=True).stdout == "a.c.d\na.c.e.f\n"
    assert "top = x\n" in tree.cli("kvs", "dir", check=True).stdout


def test_kvs_unlink(tree):
    cp = tree.cli("kvs", "unlink", "a")
    assert cp.returncode == 1 and cp.stdout == ""
    assert cp.stderr == "fluxlite kvs unlink: cannot unlink 'a': it is a non-empty directory " \
        "(use -R)\n"
    tree.cli("kvs", "unlink", "a.c.d", "top", check=True)
    assert tree.cli("kvs", "get", "top").returncode != 0
    tree.cli("kvs", "unlink", "-R", "a.c", check=True)
    assert tree.cli("kvs", "ls", "-R", "-1", "a", check=True).stdout == "a:\nb\n"
    tree.cli("kvs", "put", "empty.x=1", check=True)
    tree.cli("kvs", "unlink", "empty.x", check=True)
    tree.cli("kvs", "unlink", "empty", check=True)  # an empty directory needs no -R
    assert "empty" not in tree.cli("kvs", "ls", check=True).stdout
    tree.cli("kvs", "unlink", "-f", "nope", check=True)


@pytest.mark.parametrize("args,said", [
    (("unlink", "nope"), "cannot unlink 'nope': no such key"),
    (("unlink", "."), "cannot unlink the root directory"),
    (("unlink", "top", "a"), "non-empty directory"),
    (("dir", "top"), "'top' is not a directory"),
    (("dir", "nope"), "directory 'nope' not found"),
    (("ls", "top."), "top: Not a directory"),
    (("get", "a.c"), "key 'a.c' is a directory, not a value: read a key below it (a.c.NAME)"),
    (("put", "-a", "a.c=1"), "key 'a.c' is a directory: cannot append to it (append to a "
                             "key below it, a.c.NAME, or set a value over it)"),
])
def test_kvs_bad_input(tree, args, said):
    cp = tree.cli("kvs", *args)
    assert cp.returncode != 0 and cp.stdout == ""
    assert len(cp.stderr.splitlines()) == 1 and said in cp.stderr, cp.stderr
    assert tree.cli("kvs", "get", "top", check=True).stdout == "x\n"  # all or nothing
