"""Hostile and careless clients of the module, config and KVS-root methods.

Each attack goes at a running instance through the API or the CLI and then
checks that the answer is one clear error naming what was wrong (never EIO, a
Traceback or a hang), that what a vanished client left behind (a trace, a
version wait) is freed, and that the instance still runs jobs.
"""

from __future__ import annotations

import errno
import json
import subprocess
import sys
import time

import pytest
from test_hostile import refused, still_whole

from fluxlite.errors import FluxliteError
from fluxlite.job import jobspec as js
from fluxlite.testing import one_error_line


def _until(fn, what: str, timeout: float = 15):
    deadline = time.monotonic() + timeout
    while not fn():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _client(inst, code: str) -> subprocess.Popen:
    """A client process that runs `code` with a handle `h`, says `ready`, then waits
    to be killed."""
    p = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom fluxlite.client.sync import Handle\n"
         "h = Handle()\n" + code +
         # answered after what `code` sent (one connection, in order)
         "\nh.call('broker.ping', {}, nodeid=0)\nprint('ready', flush=True)\n"
         "time.sleep(300)\n"],
        env=inst.env, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def _kill(p: subprocess.Popen) -> None:
    p.kill()
    p.wait()
    p.stdout.close()


@pytest.mark.timeout(120)
def test_module_methods_refuse_wrong_types_with_a_clear_error(inst1):
    h = inst1.handle()
    for who in ([], {}, 5, None, "bogus"):      # a list once failed with EIO (unhashable)
        refused(h, "kvs.rusage", {"who": who}, errno.EINVAL, "who must be one of")
    for body in ({"op": []}, {}, {"op": "set", "flags": True}, [1], {"op": "set",
                                                                      "flags": "1"}):
        refused(h, "kvs.debug", body, errno.EPROTO, "kvs.debug", "op")
    refused(h, "module.remove", {"name": ""}, errno.EINVAL, "name")
    refused(h, "module.remove", {"name": 5}, errno.EPROTO, "name")
    refused(h, "module.load", {"path": ""}, errno.EINVAL, "path")
    refused(h, "module.load", {"path": "log", "args": [1]}, errno.EPROTO, "args[0]")
    refused(h, "module.trace", {"names": "kvs"}, errno.EPROTO, "names")
    refused(h, "module.trace", {"names": []}, errno.ENOENT, "name at least one")
    # the CLI: one line, no Traceback
    for args in (["module", "debug", "--set", str(2 ** 70), "kvs"],
                 ["module", "debug", "--setbit", "-1", "kvs"],
                 ["kvs", "wait", str(2 ** 64)], ["kvs", "wait", str(10 ** 30)]):
        cp = inst1.cli(*args)
        line = one_error_line(cp)
        assert "Traceback" not in cp.stderr and ("2**64-1" in line or "2**63-1" in line), line
    still_whole(inst1)


@pytest.mark.timeout(120)
def test_a_module_removed_twice_and_loaded_twice_says_so(inst1):
    assert inst1.cli("module", "remove", "log").returncode == 0
    line = one_error_line(inst1.cli("module", "remove", "log"))
    assert "log: No such file or directory" in line
    line = one_error_line(inst1.cli("logger", "hello"))
    assert "log" in line
    assert inst1.cli("module", "load", "log").returncode == 0
    line = one_error_line(inst1.cli("module", "load", "log"))
    assert "log: File exists" in line
    inst1.cli("logger", "hello again", check=True)
    still_whole(inst1)


@pytest.mark.timeout(120)
def test_requests_in_flight_while_a_module_goes_and_comes_are_all_answered(inst1):
    """Hundreds of requests to a module sent without waiting, with its removal and its
    load among them: every one gets an answer (done, or ENOSYS while it is away)."""
    h = inst1.handle()
    pending = []
    for module, topic, body in (("log", "log.append", {"message": "m"}),
                                ("sched", "sched.resource-status", {}),
                                ("sched-simple", "sched.feasibility",
                                 {"jobspec": js.Jobspec.from_command(["true"]).jobspec})):
        for _round in range(3):
            pending += [h.rpc(topic, body) for i in range(100)]
            pending.append(h.rpc("module.remove", {"name": module}))
            pending += [h.rpc(topic, body) for i in range(100)]
            pending.append(h.rpc("module.load", {"path": module}))
    answers = {"ok": 0, "ENOSYS": 0}
    for p in pending:
        try:
            h.wait(p, 30)
            p.take()
            answers["ok"] += 1
        except FluxliteError as exc:
            assert exc.errnum == errno.ENOSYS, exc.message
            answers["ENOSYS"] += 1
    assert answers["ok"] + answers["ENOSYS"] == len(pending)
    assert answers["ENOSYS"] > 0, answers
    mods = inst1.cli("module", "list", check=True).stdout
    assert "log" in mods and "sched" in mods
    still_whole(inst1)


def _tracers(h) -> dict:
    return h.call("module.stats-get", {}, nodeid=0)["tracers"]


@pytest.mark.timeout(120)
def test_trace_streams_of_vanished_clients_are_freed(inst1):
    """A trace naming a module twice (or by its alias too) was attached twice and
    freed once: each such client that went away left a tracer behind for good."""
    h = inst1.handle()
    assert _tracers(h) == {}
    clients = [_client(inst1, "s = h.rpc('module.trace', {'names': ['kvs', 'kvs', "
                              "'kvs-watch', 'content']}, streaming=True)")
               for _ in range(3)]
    clients.append(_client(inst1, "s = h.rpc('module.trace', {'names': ['log']}, "
                              "streaming=True)"))
    try:
        assert _tracers(h) == {"kvs": 3, "log": 1}
        # a module removed keeps its tracers for its return; its client leaves meanwhile
        inst1.cli("module", "remove", "log", check=True)
    finally:
        for p in clients:
            _kill(p)
    _until(lambda: _tracers(h) == {}, f"tracers left behind: {_tracers(h)}")
    inst1.cli("module", "load", "log", check=True)
    assert _tracers(h) == {}
    still_whole(inst1)


@pytest.mark.timeout(120)
def test_version_waits_end_with_their_client_and_any_new_version(inst1):
    h = inst1.handle()

    def waiters():
        return h.call("kvs.stats-get")["namespace"]["primary"]["#versionwaiters"]

    refused(h, "kvs.wait-version", {"rootseq": -1}, errno.EINVAL, "rootseq")
    refused(h, "kvs.wait-version", {"rootseq": 2 ** 63}, errno.EINVAL, "rootseq")
    refused(h, "kvs.wait-version", {"rootseq": True}, errno.EPROTO, "rootseq")
    refused(h, "kvs.wait-version", {"rootseq": 1, "namespace": "nosuch"}, errno.ENOTSUP,
            "nosuch")
    # waits that can never be reached: freed when their clients go
    clients = [_client(inst1, f"p = h.rpc('kvs.wait-version', {{'rootseq': {seq}}})")
               for seq in (2 ** 63 - 1, 10 ** 12)]
    try:
        assert waiters() == 2
    finally:
        for p in clients:
            _kill(p)
    _until(lambda: waiters() == 0, "a vanished client's version wait was kept")
    # a namespace made or removed is a version too: it answers a wait for it (the
    # wait once stayed until the next commit)
    for change in (["create", "ns1"], ["remove", "ns1"]):
        now = int(inst1.cli("kvs", "version", check=True).stdout)
        with inst1.cli_background("kvs", "wait", str(now + 1)) as p:
            _until(lambda: waiters() == 1, "the wait never came")
            inst1.cli("kvs", "namespace", *change, check=True)
            assert p.wait(timeout=30) == 0
    still_whole(inst1)


def _nested(depth: int, leaf=1, in_list: bool = False):
    obj = leaf
    for _ in range(depth):
        obj = [obj] if in_list else {"x": obj}
    return obj


@pytest.mark.timeout(120)
def test_config_load_of_deep_or_huge_objects(inst1, tmp_path):
    """A config object nested 1000 deep once failed with EIO (RecursionError in
    its checks); nesting is now bounded, and a large flat table is taken."""
    h = inst1.handle()
    before = h.call("config.get")
    for table in ("site", "tbon", "queues"):
        for depth in (40, 900):
            refused(h, "config.load", {table: _nested(depth)}, errno.EINVAL, "nest deeper")
            refused(h, "config.load", {"site": _nested(depth, in_list=True)},
                    errno.EINVAL, "nest deeper")
    assert h.call("config.get") == before
    # the CLI says the same, in one line
    deep = tmp_path / "deep.json"
    deep.write_text(json.dumps({"site": _nested(200)}))
    line = one_error_line(inst1.cli("config", "load", deep))
    assert "nest deeper than" in line
    # wide is fine: 9000 keys of a table fluxlite does not read
    wide = {"site": {f"k{i}": "v" * 100 for i in range(9000)}}
    assert h.call("config.load", wide) is None
    assert len(h.call("config.get")["site"]) == 9000
    # reload without a config file: as Flux, nothing changes
    assert inst1.cli("config", "reload").returncode == 0
    assert len(h.call("config.get")["site"]) == 9000
    h.call("config.load", before)
    still_whole(inst1)


@pytest.mark.timeout(120)
def test_input_nested_hundreds_deep_is_one_line_from_every_command(inst1, tmp_path):
    """JSON or TOML nested thousands deep once ended `config load`, `kvs put -j`,
    `start --conf` and `config reload` of such a file in a Traceback (the parsers
    recurse); each now says so in one line."""
    deep_json = '{"a":' * 3000 + "1" + "}" * 3000
    deep_toml = "a = " + "[" * 3000 + "]" * 3000 + "\n"
    (tmp_path / "deep.json").write_text(deep_json)
    (tmp_path / "deep.toml").write_text(deep_toml)
    runs = [inst1.cli("config", "load", tmp_path / "deep.json"),
            inst1.cli("config", "load", tmp_path / "deep.toml"),
            inst1.cli("config", "load", input=deep_json),
            inst1.cli("config", "load", input=deep_toml),
            inst1.cli("kvs", "put", "-j", f"deep={deep_json}"),
            inst1.cli("config", "set", "--type=object", "site.deep", deep_json),
            inst1.cli("start", "--conf", deep_toml.strip(), "true"),
            inst1.cli("start", "-c", tmp_path / "deep.toml", "true")]
    for cp in runs:
        line = one_error_line(cp)
        assert "nested too deeply" in line and "Traceback" not in cp.stderr, cp.stderr[-500:]
    assert inst1.cli("kvs", "get", "deep").returncode != 0
    still_whole(inst1)


@pytest.mark.timeout(120)
def test_jobtap_and_config_refusals_name_what_was_wrong(inst1):
    h = inst1.handle()
    for field in ("load", "remove"):
        refused(h, "job-manager.jobtap", {field: ""}, errno.EINVAL, field, ">= 1")
    # a table given a value: named as a table, not as an unknown key
    for table, value in (("tbon", 5), ("exec", "x"), ("resource", [1] * 100)):
        msg = refused(h, "config.load", {table: value}, errno.EINVAL, f"{table} is a table")
        assert "unknown key" not in msg and len(msg) < 200, msg
    assert "unknown key 'bogus'" in refused(h, "config.load", {"bogus": 1}, errno.EINVAL)
    still_whole(inst1)


@pytest.mark.timeout(120)
def test_an_error_quoting_a_huge_value_is_still_an_answer(inst1):
    """An error sentence that quoted a 70000-character name it was given (an unknown
    config key, a namespace) made a header over the 64 KiB every receiver allows:
    the client could not read its answer.  The sentence is cut."""
    h = inst1.handle()
    huge = "x" * 70000
    for topic, payload in (("config.load", {huge: 1}), ("kvs.lookup", {"key": "a",
                                                                       "namespace": huge}),
                           ("kvs.getroot", {"namespace": huge}),
                           ("kvs.namespace-remove", {"namespace": huge[:255]}),
                           ("job-manager.jobtap", {"load": huge[:4000]})):
        with pytest.raises(FluxliteError) as info:
            h.call(topic, payload, timeout=10)
        assert info.value.errnum in (errno.EINVAL, errno.ENOTSUP, errno.ENOENT), \
            info.value.message[:200]
        assert len(info.value.message) <= 4096
    still_whole(inst1)
