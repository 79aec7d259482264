"""KVS namespaces and symbolic links through the kvs service's RPCs: namespaces
made, listed, written, read, watched and removed apart from the primary one and
kept by a state directory; links followed, read and kept."""

import errno

import pytest

from fluxlite.errors import FluxliteError
from fluxlite.protocol import kvs as kvsv


def ls(h, payload, **kw) -> list[str]:
    """A directory's names (kvs.lookup with FLUX_KVS_READDIR)."""
    return kvsv.entries(h.call("kvs.lookup", {**payload, "flags": kvsv.READDIR}, **kw))[0]



def _names(h):
    return [ns["namespace"] for ns in h.call("kvs.namespace-list")["namespaces"]]


def test_a_namespace_is_a_tree_of_its_own(inst1):
    h = inst1.handle()
    assert _names(h) == ["primary"]
    h.call("kvs.namespace-create", {"namespace": "lab", "owner": -1, "flags": 0})
    listed = h.call("kvs.namespace-list")["namespaces"]
    assert [n["namespace"] for n in listed] == ["primary", "lab"]
    assert listed[1]["owner"] == listed[0]["owner"]      # -1: the instance owner
    with pytest.raises(FluxliteError) as exc:
        h.call("kvs.namespace-create", {"namespace": "lab"})
    assert exc.value.errnum == errno.EEXIST

    h.call("kvs.commit", {"namespace": "lab", "ops": [{"key": "a.b", "value": 1}]})
    h.call("kvs.commit", {"ops": [{"key": "a.c", "value": 2}]})
    assert kvsv.value(h.call("kvs.lookup", {"key": "a.b", "namespace": "lab"})) == 1
    assert ls(h, {"key": "a", "namespace": "lab"}) == ["b"]
    assert ls(h, {"key": "a"}) == ["c"]
    with pytest.raises(FluxliteError, match="not found"):
        h.call("kvs.lookup", {"key": "a.b"})
    with pytest.raises(FluxliteError, match="not found"):
        h.call("kvs.lookup", {"key": "a.c", "namespace": "lab"})
    got = h.call("kvs.lookup", {"key": "a.b", "namespace": "lab"})
    assert got["namespace"] == "lab"
    assert kvsv.value(h.call("kvs.lookup", {"key": "a.c", "namespace": "primary"})) == 2


def test_a_missing_namespace_is_enotsup_and_primary_stays(inst1):
    h = inst1.handle()
    for topic, payload in [("kvs.lookup", {"key": "k"}),
                           ("kvs.lookup", {"key": ".", "flags": kvsv.READDIR}),
                           ("kvs.commit", {"ops": [{"key": "k", "value": 1}]}),
                           ("kvs-watch.lookup", {"key": "k"}),
                           ("kvs.namespace-remove", {})]:
        with pytest.raises(FluxliteError) as exc:
            h.call(topic, {**payload, "namespace": "nowhere"})
        assert exc.value.errnum == errno.ENOTSUP, topic
        assert "'nowhere'" in str(exc.value)
    with pytest.raises(FluxliteError, match="primary KVS namespace cannot be removed"):
        h.call("kvs.namespace-remove", {"namespace": "primary"})
    with pytest.raises(FluxliteError):
        h.call("kvs.namespace-create", {"namespace": "a/b"})
    assert _names(h) == ["primary"]


def test_removing_a_namespace_drops_its_keys_and_ends_its_watches(inst1):
    h = inst1.handle()
    h.call("kvs.namespace-create", {"namespace": "tmp"})
    h.call("kvs.commit", {"namespace": "tmp", "ops": [{"key": "w", "value": 1},
                                                      {"key": "log", "append": [1, 2]}]})
    stream = h.stream("kvs-watch.lookup", {"key": "w", "namespace": "tmp",
                                           "flags": kvsv.WATCH}, timeout=10)
    assert kvsv.value(next(stream)) == 1
    h.call("kvs.commit", {"ops": [{"key": "w", "value": 5}]})   # the primary one's w
    h.call("kvs.commit", {"namespace": "tmp", "ops": [{"key": "w", "value": 2}]})
    assert kvsv.value(next(stream)) == 2
    h.call("kvs.namespace-remove", {"namespace": "tmp"})
    with pytest.raises(FluxliteError) as exc:
        next(stream)
    assert exc.value.errnum == errno.ENOTSUP
    assert _names(h) == ["primary"]
    assert h.call("kvs.stats")["watchers"] == 0
    h.call("kvs.namespace-create", {"namespace": "tmp"})      # made afresh: empty
    assert ls(h, {"key": ".", "namespace": "tmp"}) == []
    assert kvsv.value(h.call("kvs.lookup", {"key": "w"})) == 5


def test_a_state_directory_keeps_namespaces(instance_factory, tmp_path):
    sd = tmp_path / "state"
    a = instance_factory(1, setattrs=[f"statedir={sd}"])
    h = a.handle()
    for name in ("keep", "gone"):
        h.call("kvs.namespace-create", {"namespace": name, "owner": 4242})
        h.call("kvs.commit", {"namespace": name,
                              "ops": [{"key": "d.v", "value": {"m": name}},
                                      {"key": "d.log", "append": ["x"]},
                                      {"key": "ln", "symlink": "d.v"}]})
    h.call("kvs.namespace-remove", {"namespace": "gone"})
    assert a.stop() == 0
    b = instance_factory(1, setattrs=[f"statedir={sd}"])
    h = b.handle()
    listed = h.call("kvs.namespace-list")["namespaces"]
    assert [(n["namespace"], n["owner"]) for n in listed[1:]] == [("keep", 4242)]
    assert kvsv.value(h.call("kvs.lookup", {"key": "d.v", "namespace": "keep"})) == {"m": "keep"}
    assert kvsv.value(h.call("kvs.lookup", {"key": "d.log", "namespace": "keep"})) == ["x"]
    assert kvsv.value(h.call("kvs.lookup", {"key": "ln", "namespace": "keep"})) == {"m": "keep"}
    with pytest.raises(FluxliteError, match="not found"):
        h.call("kvs.lookup", {"key": "d.v"})


def test_symbolic_links_are_followed_and_read(inst1):
    h = inst1.handle()
    h.call("kvs.namespace-create", {"namespace": "far"})
    h.call("kvs.commit", {"namespace": "far", "ops": [{"key": "there.v", "value": "far"}]})
    h.call("kvs.commit", {"ops": [
        {"key": "dir.a", "value": 1},
        {"key": "to_a", "symlink": "dir.a"},
        {"key": "to_dir", "symlink": "dir"},
        {"key": "to_link", "symlink": "to_a"},
        {"key": "dangling", "symlink": "no.such"},
        {"key": "loop1", "symlink": "loop2"}, {"key": "loop2", "symlink": "loop1"},
        # Flux's own commit operation for a link into another namespace
        {"key": "to_far", "flags": 0, "dirent": {"ver": 1, "type": "symlink", "data": {
            "target": "there", "namespace": "far"}}}]})
    assert kvsv.value(h.call("kvs.lookup", {"key": "to_a"})) == 1
    assert kvsv.value(h.call("kvs.lookup", {"key": "to_link"})) == 1
    assert kvsv.value(h.call("kvs.lookup", {"key": "to_dir.a"})) == 1
    assert ls(h, {"key": "to_dir"}) == ["a"]
    assert kvsv.value(h.call("kvs.lookup", {"key": "to_far.v"})) == "far"
    with pytest.raises(FluxliteError, match="not found"):
        h.call("kvs.lookup", {"key": "dangling"})
    with pytest.raises(FluxliteError) as exc:
        h.call("kvs.lookup", {"key": "loop1"})
    assert exc.value.errnum == errno.ELOOP
    with pytest.raises(FluxliteError, match="is a directory"):
        h.call("kvs.lookup", {"key": "to_dir"})

    READLINK, TREEOBJ = 2, 16            # Flux's FLUX_KVS_READLINK, FLUX_KVS_TREEOBJ
    link = h.call("kvs.lookup", {"key": "to_link", "flags": READLINK})["val"]
    assert link == {"ver": 1, "type": "symlink", "data": {"target": "to_a"}}
    far = h.call("kvs.lookup", {"key": "to_far", "flags": TREEOBJ})["val"]
    assert far["data"] == {"target": "there", "namespace": "far"}
    with pytest.raises(FluxliteError, match="not a symbolic link") as exc:
        h.call("kvs.lookup", {"key": "dir.a", "flags": READLINK})
    assert exc.value.errnum == errno.EINVAL
    listing = h.call("kvs.lookup", {"key": ".", "flags": 1})["val"]["data"]
    assert listing["to_a"]["type"] == "symlink"

    # a link is a value of its own: replaced by a value, unlinked without its target
    h.call("kvs.commit", {"ops": [{"key": "to_a", "unlink": True}]})
    assert kvsv.value(h.call("kvs.lookup", {"key": "dir.a"})) == 1
    with pytest.raises(FluxliteError, match="not found"):
        h.call("kvs.lookup", {"key": "to_link"})
    h.call("kvs.namespace-remove", {"namespace": "far"})
    with pytest.raises(FluxliteError) as exc:
        h.call("kvs.lookup", {"key": "to_far.v"})
    assert exc.value.errnum == errno.ENOTSUP


def test_the_kvs_command_line_takes_namespaces_and_links(inst1):
    inst1.cli("kvs", "namespace", "create", "-o", "4242", "team", check=True)
    listed = inst1.cli("kvs", "namespace", "list", check=True).stdout.splitlines()
    assert listed[0].split() == ["NAMESPACE", "OWNER", "FLAGS"]
    assert listed[2].split() == ["team", "4242", "0x00000000"]
    inst1.cli("kvs", "put", "-N", "team", "cfg.n=3", check=True)
    inst1.cli("kvs", "mkdir", "--namespace=team", "empty", check=True)
    assert inst1.cli("kvs", "get", "-N", "team", "cfg.n", check=True).stdout == "3\n"
    assert inst1.cli("kvs", "ls", "-1F", "-N", "team", check=True).stdout == "cfg.\nempty.\n"
    assert inst1.cli("kvs", "dir", "-N", "team", "-R", check=True).stdout == "cfg.n = 3\n"
    assert inst1.cli("kvs", "get", "cfg.n").returncode != 0
    inst1.cli("kvs", "link", "-T", "team", "cfg.n", "from_team", check=True)
    inst1.cli("kvs", "link", "-N", "team", "cfg", "alias", check=True)
    assert inst1.cli("kvs", "get", "from_team", check=True).stdout == "3\n"
    assert inst1.cli("kvs", "get", "-N", "team", "alias.n", check=True).stdout == "3\n"
    out = inst1.cli("kvs", "readlink", "from_team", check=True).stdout
    assert out == "team::cfg.n\n"
    assert inst1.cli("kvs", "readlink", "-N", "team", "alias", check=True).stdout == "cfg\n"
    cp = inst1.cli("kvs", "readlink", "-N", "team", "cfg.n")
    assert cp.returncode != 0 and "not a symbolic link" in cp.stderr
    inst1.cli("kvs", "unlink", "-N", "team", "-R", "cfg", check=True)
    assert inst1.cli("kvs", "ls", "-1F", "-N", "team", check=True).stdout == "alias@\nempty.\n"
    inst1.cli("kvs", "namespace", "remove", "team", check=True)
    cp = inst1.cli("kvs", "get", "-N", "team", "empty")
    assert cp.returncode != 0 and "'team' does not exist" in cp.stderr
