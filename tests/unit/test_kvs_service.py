"""The kvs service as its clients see it, driven through its dispatcher without a
broker: requests in, responses recorded.  Commits (set, append, unlink, all or
nothing), keys and directories, lookups and listings, watches (value and append
modes, waitcreate, ends, unwatch, a vanished client), and the errors each names.
docs/protocol.md's kvs section is the contract these check."""

import errno

import pytest

from fluxlite.errors import FluxliteError
from fluxlite.protocol import kvs as kvsv
from fluxlite.protocol.message import ROLE_OWNER, ROLE_USER, STREAMING, Message
from fluxlite.service.base import ServiceContext
from fluxlite.service.kvs import KVSService

pytestmark = pytest.mark.timeout(30)

CLIENT = b"\x01client"
OTHER = b"\x02other"

def ls(h, payload, **kw) -> list[str]:
    """A directory's names (kvs.lookup with FLUX_KVS_READDIR)."""
    return kvsv.entries(h.call("kvs.lookup", {**payload, "flags": kvsv.READDIR}, **kw))[0]



class KVS:
    """A KVS service and the responses it sent, per (route, matchtag)."""

    def __init__(self):
        self.sent: list[Message] = []
        ctx = ServiceContext(rank=0, size=1, owner=1000, hostname="h", hosts=("h",),
                             attrs={},
                             rpc=None, send=None, respond=self.sent.append, publish=None,
                             state=lambda: "run", at_least=lambda s: False)
        self.svc = KVSService(ctx)
        self._tag = 0

    def request(self, topic, payload=None, *, stream=False, client=CLIENT, role=ROLE_OWNER,
                userid=1000) -> Message:
        self._tag += 1
        msg = Message.request(topic, payload, flags=STREAMING if stream else 0,
                              matchtag=self._tag, userid=userid, role=role)
        msg.route = [client]
        self.svc.dispatch(msg)
        return msg

    def answers(self, req: Message) -> list[Message]:
        return [r for r in self.sent if r.matchtag == req.matchtag and r.route == req.route]

    def call(self, topic, payload=None, **kw):
        """One request, its one answer: the payload, or FluxliteError(errnum)."""
        req = self.request(topic, payload, **kw)
        (resp,) = self.answers(req)
        if resp.errnum:
            raise FluxliteError(resp.errstr, resp.errnum)
        return resp.payload


@pytest.fixture
def kvs():
    k = KVS()
    yield k
    k.svc.stop()


def errnum_of(fn, *args, **kw) -> int:
    with pytest.raises(FluxliteError) as ei:
        fn(*args, **kw)
    return ei.value.errnum


# ------------------------------------------------------------------ commits
def test_commit_sets_appends_and_unlinks_and_counts_versions(kvs):
    v1 = kvs.call("kvs.commit", {"ops": [{"key": "a.b", "value": 1},
                                         {"key": "a.log", "append": [{"n": 1}]}]})["version"]
    v2 = kvs.call("kvs.commit", {"ops": [{"key": "a.log", "append": [{"n": 2}]}]})["version"]
    assert v2 == v1 + 1
    assert kvsv.value(kvs.call("kvs.lookup", {"key": "a.b"})) == 1
    assert kvsv.value(kvs.call("kvs.lookup", {"key": "a.log"})) == [{"n": 1}, {"n": 2}]
    kvs.call("kvs.commit", {"ops": [{"key": "a.b", "unlink": True}]})
    assert errnum_of(kvs.call, "kvs.lookup", {"key": "a.b"}) == errno.ENOENT
    # unlinking what is not there is no error, and unlinking a directory takes its keys
    kvs.call("kvs.commit", {"ops": [{"key": "no.such.key", "unlink": True}]})
    kvs.call("kvs.commit", {"ops": [{"key": "a", "unlink": True}]})
    assert errnum_of(kvs.call, "kvs.lookup", {"key": "a.log"}) == errno.ENOENT


def test_a_commit_that_fails_half_way_changes_nothing(kvs):
    kvs.svc.commit([{"key": "x.val", "value": 7}, {"key": "x.log", "append": ["e1"]},
                    {"key": "x.s", "value": "t"}])
    version = kvs.svc.version
    bad = [{"key": "x.log", "append": ["e2"]},          # would succeed
           {"key": "x.s", "append": ["ext"]},           # text onto text: would succeed
           {"key": "x.new.deep", "value": 1},           # would create directories
           {"key": "x.val", "append": ["oops"]}]        # fails: not a list or a string
    assert errnum_of(kvs.svc.commit, bad) == errno.EINVAL
    assert kvs.svc.lookup("x.log") == ["e1"]
    assert kvs.svc.lookup("x.s") == "t"
    assert not kvs.svc.exists("x.new.deep")
    assert ls(kvs, {"key": "x"}) == ["log", "s", "val"]
    assert kvs.svc.version == version


def test_values_and_directories_replace_each_other_as_in_flux(kvs):
    kvs.svc.commit([{"key": "d.leaf", "value": 1}])
    kvs.svc.commit([{"key": "d", "value": 2}])          # a value over a directory
    assert kvs.svc.lookup("d") == 2 and not kvs.svc.exists("d.leaf")
    kvs.svc.commit([{"key": "d.leaf.below", "value": 3}])   # a key below a value
    assert kvs.svc.lookup("d.leaf.below") == 3
    assert errnum_of(kvs.svc.lookup, "d") == errno.EISDIR
    kvs.svc.commit([{"key": "m", "value": {"a": 1}}])    # a map (kept in the store)
    kvs.svc.commit([{"key": "m.x", "value": 4}])
    assert ls(kvs, {"key": "m"}) == ["x"]
    kvs.svc.commit([{"key": "v", "value": "x"}, {"key": "v.gone", "unlink": True}])
    assert kvs.svc.lookup("v") == "x"                   # nothing to unlink below a value
    # an append to a directory is refused; what came before in the commit is taken back
    assert errnum_of(kvs.svc.commit, [{"key": "e.x", "value": 1},
                                      {"key": "d", "append": ["e"]}]) == errno.EISDIR
    assert not kvs.svc.exists("e.x") and not kvs.svc.exists("e")
    assert kvs.svc.lookup("d.leaf.below") == 3


def test_a_commit_applies_its_operations_in_order(kvs):
    """As a Flux KVS transaction: an operation sees what the ones before it did."""
    kvs.svc.commit([{"key": "d.leaf", "value": 1}])
    kvs.svc.commit([{"key": "d", "unlink": True}, {"key": "d", "value": 2}])
    assert kvs.svc.lookup("d") == 2
    kvs.svc.commit([{"key": "v", "value": 1}, {"key": "v", "unlink": True},
                    {"key": "v.below", "value": 3}])
    assert kvs.svc.lookup("v.below") == 3


@pytest.mark.parametrize("op, errnum", [
    ({"key": "", "value": 1}, errno.EINVAL),           # an empty key
    ({"value": 1}, errno.EPROTO),                      # no key
    ({"key": "a..b", "value": 1}, errno.EINVAL),       # an empty component
    ({"key": "a", "append": "not-a-list"}, errno.EPROTO),
    ({"key": "a"}, errno.EPROTO),
])
def test_malformed_operations_are_refused_with_the_reason(kvs, op, errnum):
    req = kvs.request("kvs.commit", {"ops": [op]})
    (resp,) = kvs.answers(req)
    assert resp.errnum == errnum, resp.errstr
    assert resp.errstr   # a sentence, not only a number
    assert kvs.svc.version == 0


def test_commit_is_for_the_owner_reads_are_for_anyone(kvs):
    kvs.svc.commit([{"key": "k", "value": "v"}])
    req = kvs.request("kvs.commit", {"ops": [{"key": "k", "value": "w"}]},
                      role=ROLE_USER, userid=2000)
    (resp,) = kvs.answers(req)
    assert resp.errnum == errno.EPERM
    assert kvsv.value(kvs.call("kvs.lookup", {"key": "k"}, role=ROLE_USER, userid=2000)) == "v"


def test_leading_and_trailing_dots_name_the_same_key(kvs):
    kvs.svc.commit([{"key": ".a.b.", "value": 5}])
    assert kvs.svc.lookup("a.b") == 5


# ---------------------------------------------------------------- listings
def test_ls_marks_directories_and_refuses_values_and_missing_keys(kvs):
    kvs.svc.commit([{"key": "job.1.eventlog", "append": [{}]},
                    {"key": "job.1.R", "value": {"r": 1}}, {"key": "job.2.R", "value": {}},
                    {"key": "top", "value": 0}])
    assert ls(kvs, {"key": "."}) == ["job.", "top"]
    assert ls(kvs, {"key": "job"}) == ["1.", "2."]
    assert ls(kvs, {"key": "job.1"}) == ["R", "eventlog"]
    assert errnum_of(ls, kvs, {"key": "top"}) == errno.ENOTDIR
    assert errnum_of(ls, kvs, {"key": "job.3"}) == errno.ENOENT


def test_a_map_read_back_is_the_readers_own_copy(kvs):
    kvs.svc.commit([{"key": "spec", "value": {"env": {"A": "1"}}}])
    got = kvs.svc.lookup("spec")
    got["env"]["A"] = "changed"
    assert kvs.svc.lookup("spec") == {"env": {"A": "1"}}


# ----------------------------------------------------------------- watches
WATCH, WAITCREATE, WATCH_APPEND = kvsv.WATCH, kvsv.WAITCREATE, kvsv.WATCH_APPEND


def values(answers):
    """What each answer of a kvs-watch.lookup stream holds, and its end's errnum."""
    return [kvsv.value(r.payload) if not r.errnum else r.errnum for r in answers]


def test_watch_sends_the_value_now_then_each_change_and_ends_when_removed(kvs):
    kvs.svc.commit([{"key": "w.k", "value": 1}])
    req = kvs.request("kvs-watch.lookup", {"key": "w.k", "flags": WATCH}, stream=True)
    kvs.svc.commit([{"key": "w.k", "value": 2}])
    kvs.svc.commit([{"key": "w.other", "value": 0}])       # not watched: nothing sent
    kvs.svc.commit([{"key": "w", "unlink": True}])           # its directory goes
    got = kvs.answers(req)
    assert values(got) == [1, 2, errno.ENODATA]
    assert got[0].payload["namespace"] == "primary" and got[0].payload["key"] == "w.k"
    assert got[0].payload["val"]["type"] == "val"
    assert kvs.call("kvs.stats")["watchers"] == 0


def test_uniq_watch_sends_only_a_changed_value(kvs):
    kvs.svc.commit([{"key": "u", "value": 1}])
    req = kvs.request("kvs-watch.lookup", {"key": "u", "flags": WATCH | kvsv.WATCH_UNIQ},
                      stream=True)
    kvs.svc.commit([{"key": "u", "value": 1}])
    kvs.svc.commit([{"key": "u", "value": 2}])
    assert values(kvs.answers(req)) == [1, 2]


def test_append_watch_sends_entries_so_far_then_only_new_ones(kvs):
    kvs.svc.commit([{"key": "log", "append": [1, 2]}])
    req = kvs.request("kvs-watch.lookup", {"key": "log", "flags": WATCH | WATCH_APPEND},
                      stream=True)
    kvs.svc.append("log", 3)
    kvs.svc.append("log", 4, 5)
    assert values(kvs.answers(req)) == [[1, 2], [3], [4, 5]]


def test_append_watch_follows_a_log_that_moved_to_the_disk_store(kvs):
    kvs.svc.append("out", "first")
    req = kvs.request("kvs-watch.lookup", {"key": "out", "flags": WATCH | WATCH_APPEND},
                      stream=True)
    many = [f"line {i}" for i in range(300)]      # long enough to leave the heap
    kvs.svc.commit([{"key": "out", "append": many}])
    kvs.svc.append("out", "last")
    entries = [e for got in values(kvs.answers(req)) for e in got]
    assert entries == ["first", *many, "last"]
    assert kvsv.value(kvs.call("kvs.lookup", {"key": "out"})) == \
        ["first", *many, "last"]


def test_waitcreate_waits_for_a_missing_key_without_it_enoent(kvs):
    assert errnum_of(kvs.call, "kvs-watch.lookup", {"key": "later", "flags": WATCH},
                     stream=True) == errno.ENOENT
    req = kvs.request("kvs-watch.lookup", {"key": "later", "flags": WATCH | WAITCREATE},
                      stream=True)
    assert kvs.answers(req) == []
    kvs.svc.commit([{"key": "later", "value": "here"}])
    assert values(kvs.answers(req)) == ["here"]


def test_waitcreate_without_watch_answers_once(kvs):
    req = kvs.request("kvs-watch.lookup", {"key": "once", "flags": WAITCREATE})
    kvs.svc.commit([{"key": "once", "value": 1}])
    kvs.svc.commit([{"key": "once", "value": 2}])
    assert values(kvs.answers(req)) == [1]
    assert kvs.call("kvs.stats")["watchers"] == 0


def test_watch_refuses_unknown_flags_and_a_watch_that_cannot_stream(kvs):
    kvs.svc.commit([{"key": "k", "value": 0}])
    assert errnum_of(kvs.call, "kvs-watch.lookup", {"key": "k", "flags": WATCH | 1},
                     stream=True) == errno.EINVAL
    assert errnum_of(kvs.call, "kvs-watch.lookup", {"key": "k", "flags": WATCH}) \
        == errno.EINVAL
    assert kvs.call("kvs.stats")["watchers"] == 0


def test_append_watch_of_a_value_is_refused_once_it_exists(kvs):
    req = kvs.request("kvs-watch.lookup",
                      {"key": "v", "flags": WATCH | WATCH_APPEND | WAITCREATE}, stream=True)
    kvs.svc.commit([{"key": "v", "value": 42}])      # neither a list nor text
    (resp,) = kvs.answers(req)
    assert resp.errnum == errno.EINVAL
    assert kvs.call("kvs.stats")["watchers"] == 0


def test_cancel_ends_only_that_clients_stream(kvs):
    kvs.svc.commit([{"key": "k", "value": 0}])
    mine = kvs.request("kvs-watch.lookup", {"key": "k", "flags": WATCH}, stream=True)
    theirs = kvs.request("kvs-watch.lookup", {"key": "k", "flags": WATCH}, stream=True,
                         client=OTHER)
    # another client naming my matchtag ends nothing of mine
    kvs.call("kvs-watch.cancel", {"matchtag": mine.matchtag}, client=OTHER)
    kvs.call("kvs-watch.cancel", {"matchtag": mine.matchtag})
    kvs.svc.commit([{"key": "k", "value": 1}])
    assert [r.errnum for r in kvs.answers(mine)] == [0, errno.ENODATA]
    assert values(kvs.answers(theirs)) == [0, 1]


def test_a_vanished_client_leaves_no_watch_behind(kvs):
    kvs.svc.commit([{"key": "k", "value": 0}])
    for _ in range(3):
        kvs.request("kvs-watch.lookup", {"key": "k", "flags": WATCH}, stream=True)
    kvs.request("kvs-watch.lookup", {"key": "gone.soon", "flags": WATCH | WAITCREATE},
                stream=True)
    assert kvs.call("kvs.stats")["watchers"] == 4
    kvs.request("kvs-watch.disconnect")      # the router names the service the client used
    assert kvs.call("kvs.stats")["watchers"] == 0
    before = len(kvs.sent)
    kvs.svc.commit([{"key": "k", "value": 1}, {"key": "gone.soon", "value": 1}])
    assert len(kvs.sent) == before   # nothing sent to the vanished client


def test_watching_a_directory_is_refused(kvs):
    kvs.svc.commit([{"key": "dir.k", "value": 0}])
    assert errnum_of(kvs.call, "kvs-watch.lookup", {"key": "dir", "flags": WATCH},
                     stream=True) == errno.EISDIR


def test_mkdir_makes_an_empty_directory_that_outlives_a_restart(tmp_path):
    """{key, mkdir: true} (Flux's kvs mkdir): an empty directory, listed and read as
    one, replacing whatever was at the key; a state directory keeps it."""
    def kvs_in(statedir):
        k = KVS()
        k.svc.stop()
        ctx = ServiceContext(rank=0, size=1, owner=1000, hostname="h", hosts=("h",),
                             attrs={"rundir": str(tmp_path), "statedir": str(statedir)},
                             rpc=None, send=None, respond=k.sent.append, publish=None,
                             state=lambda: "run", at_least=lambda s: False)
        k.svc = KVSService(ctx)
        return k

    (tmp_path / "state").mkdir()
    k = kvs_in(tmp_path / "state")
    k.call("kvs.commit", {"ops": [{"key": "d.old", "value": 1}]})
    k.call("kvs.commit", {"ops": [{"key": "d", "mkdir": True}, {"key": "e", "mkdir": True}]})
    assert ls(k, {"key": "d"}) == []
    assert errnum_of(k.call, "kvs.lookup", {"key": "d"}) == errno.EISDIR
    k.call("kvs.commit", {"ops": [{"key": "e.x", "value": 2}]})
    # replacements as in Flux: a value over a directory, a directory over a value
    k.call("kvs.commit", {"ops": [{"key": "r.sub.k", "value": 1}, {"key": "v", "value": 1}]})
    k.call("kvs.commit", {"ops": [{"key": "r", "value": {"m": 1}},
                                  {"key": "v.below", "value": 2}]})
    k.svc.store.flush()
    k.svc.stop()
    again = kvs_in(tmp_path / "state")
    try:
        assert ls(again, {"key": "."}) == ["d.", "e.", "r", "v."]
        assert ls(again, {"key": "d"}) == []
        assert kvsv.value(again.call("kvs.lookup", {"key": "e.x"})) == 2
        assert kvsv.value(again.call("kvs.lookup", {"key": "r"})) == {"m": 1}
        assert kvsv.value(again.call("kvs.lookup", {"key": "v.below"})) == 2
    finally:
        again.svc.stop()


def test_fluxs_lookup_and_commit_payloads_as_rfc_11_tree_objects(kvs):
    """kvs.lookup answers with RFC 11 tree objects, and kvs.commit takes Flux's
    operations ({key, flags, dirent}) beside fluxlite's own."""
    import base64
    import json

    def val(raw: bytes) -> dict:
        return {"ver": 1, "type": "val", "data": base64.b64encode(raw).decode()}

    kvs.call("kvs.commit", {"namespace": "primary", "flags": 0, "ops": [
        {"key": "f.n", "flags": 0, "dirent": val(b"42")},
        {"key": "f.raw", "flags": 0, "dirent": val(b"\xff\x00")},
        {"key": "f.log", "flags": 32, "dirent": val(b'{"name":"a"}')},
        {"key": "f.log", "flags": 32, "dirent": val(b'{"name":"b"}')},
        {"key": "f.empty", "flags": 0, "dirent": {"ver": 1, "type": "dir", "data": {}}},
        {"key": "f.gone", "flags": 0, "dirent": val(b"1")},
        {"key": "f.gone", "flags": 0, "dirent": None}]})
    assert kvs.svc.lookup("f.n") == 42 and kvs.svc.lookup("f.raw") == b"\xff\x00"
    assert kvs.svc.lookup("f.log") == [{"name": "a"}, {"name": "b"}]
    got = kvs.call("kvs.lookup", {"key": "f.n", "flags": 0})
    assert got == {"namespace": "primary", "val": val(b"42")}
    log = kvs.call("kvs.lookup", {"key": "f.log"})["val"]
    assert base64.b64decode(log["data"]) == b'{"name":"a"}\n{"name":"b"}\n'   # RFC 18
    d = kvs.call("kvs.lookup", {"key": "f", "flags": 1})["val"]
    assert d["type"] == "dir" and sorted(d["data"]) == ["empty", "log", "n", "raw"]
    assert d["data"]["empty"] == {"ver": 1, "type": "dir", "data": {}}
    assert json.loads(base64.b64decode(d["data"]["n"]["data"])) == 42
    assert errnum_of(kvs.call, "kvs.lookup", {"key": "f"}) == errno.EISDIR
    assert errnum_of(kvs.call, "kvs.lookup", {"key": "f.n", "flags": 1}) == errno.ENOTDIR
    assert errnum_of(kvs.call, "kvs.lookup", {"key": "nope"}) == errno.ENOENT
    assert errnum_of(kvs.call, "kvs.lookup", {"key": "f.n", "namespace": "other"}) \
        == errno.ENOTSUP
    link = {"key": "f.s", "flags": 0, "dirent": {"ver": 1, "type": "symlink",
                                                 "data": {"target": "f.n"}}}
    kvs.call("kvs.commit", {"ops": [link]})
    assert kvs.svc.lookup("f.s") == 42
    bad = {"key": "f.r", "flags": 0, "dirent": {"ver": 1, "type": "valref",
                                                "data": ["sha1-0"]}}
    assert errnum_of(kvs.call, "kvs.commit", {"ops": [bad]}) == errno.EINVAL
    assert errnum_of(kvs.call, "kvs.commit",
                     {"ops": [{"key": "f.x", "dirent": {"ver": 1, "type": "val",
                                                        "data": "!!"}}]}) == errno.EPROTO


def test_namespace_owner_rules_are_fluxs(kvs):
    """The instance owner makes and removes namespaces; a namespace's owner and
    the instance owner may use it, another user not even through a link."""
    guest = {"role": ROLE_USER, "userid": 2000}
    stranger = {"role": ROLE_USER, "userid": 3000}
    assert errnum_of(kvs.call, "kvs.namespace-create", {"namespace": "g"},
                     **guest) == errno.EPERM
    kvs.call("kvs.namespace-create", {"namespace": "g", "owner": 2000})
    kvs.call("kvs.commit", {"namespace": "g", "ops": [{"key": "k", "value": 1}]}, **guest)
    assert kvsv.value(kvs.call("kvs.lookup", {"key": "k", "namespace": "g"}, **guest)) == 1
    assert kvsv.value(kvs.call("kvs.lookup", {"key": "k", "namespace": "g"})) == 1
    for topic, payload in [("kvs.lookup", {"key": "k"}),
                           ("kvs.lookup", {"key": ".", "flags": kvsv.READDIR}),
                           ("kvs.commit", {"ops": [{"key": "k", "value": 2}]})]:
        assert errnum_of(kvs.call, topic, {**payload, "namespace": "g"},
                         **stranger) == errno.EPERM, topic
    assert errnum_of(kvs.call, "kvs-watch.lookup", {"key": "k", "namespace": "g",
                                                    "flags": kvsv.WATCH},
                     stream=True, **stranger) == errno.EPERM
    # a link in the primary namespace does not open the guest's to a stranger
    kvs.call("kvs.commit", {"ops": [{"key": "peek", "symlink": "k",
                                     "target_namespace": "g"}]})
    assert kvsv.value(kvs.call("kvs.lookup", {"key": "peek"}, **guest)) == 1
    assert errnum_of(kvs.call, "kvs.lookup", {"key": "peek"}, **stranger) == errno.EPERM
    assert errnum_of(kvs.call, "kvs.namespace-remove", {"namespace": "g"},
                     **guest) == errno.EPERM
    listed = kvs.call("kvs.namespace-list", **stranger)["namespaces"]
    assert [(n["namespace"], n["owner"]) for n in listed] == [("primary", 1000), ("g", 2000)]
