"""Attribute and config parsing, and the broker state machine."""

import pytest

from fluxlite.broker import attrs, state
from fluxlite.errors import UsageError


def test_setattr_parsing():
    assert attrs.parse_setattr("tbon.topo=kary:2") == ("tbon.topo", "kary:2")
    assert attrs.parse_setattr("tbon.lost-timeout=none") == ("tbon.lost-timeout", "none")


@pytest.mark.parametrize("bad,words", [
    ("nosuch=1", "unknown attribute"),
    ("tbon.topo=kary:x", "invalid value for tbon.topo"),
    ("tbon.torpid-timeout=soon", "invalid value"),
    ("rank=3", "set by the broker"),
    ("novalue", "NAME=VALUE"),
])
def test_setattr_errors(bad, words):
    with pytest.raises(UsageError, match=words):
        attrs.parse_setattr(bad)


def test_runtime_check():
    assert attrs.check("tbon.torpid-timeout", "5s", at_runtime=True) == "5s"
    with pytest.raises(UsageError, match="cannot be changed"):
        attrs.check("tbon.topo", "kary:2", at_runtime=True)


def test_config_file(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('[tbon]\ntopo = "kary:2"\nlost-timeout = "5s"\n[batch]\npersist = false\n')
    assert attrs.load_config(str(f)) == {"tbon.topo": "kary:2", "tbon.lost-timeout": "5s",
                                         "batch.persist": "0"}
    f.write_text('[tbon]\nbogus = 1\n')
    with pytest.raises(UsageError, match="unknown key 'tbon.bogus'"):
        attrs.load_config(str(f))
    f.write_text('[tbon\n')
    with pytest.raises(UsageError, match="not valid TOML"):
        attrs.load_config(str(f))


def test_shipped_config_is_valid():
    import os
    here = os.path.dirname(__file__)
    values = attrs.load_config(os.path.join(here, "..", "..", "etc", "fluxlite.toml"))
    assert values["tbon.topo"] == "kary:32"
    # it writes out every configurable key, each with its default
    configurable = {k for k, a in attrs.ATTRIBUTES.items() if a.config and a.default is not None}
    missing = configurable - set(values) - {"instance-level", "jobid", "parent-uri"}
    assert not missing, f"etc/fluxlite.toml lacks {sorted(missing)}"
    for k in set(values) & configurable:
        assert values[k] == attrs.check(k, attrs.ATTRIBUTES[k].default), k


def test_state_machine_paths():
    sm = state.StateMachine()
    assert sm.post("parent-none") == ("join", "init")
    sm.post("init-success")
    sm.post("quorum-full")
    assert sm.post("rc2-success") == ("run", "cleanup")
    sm.post("cleanup-success")
    assert sm.post("children-complete") == ("shutdown", "exit")
    with pytest.raises(state.InvalidTransition):
        sm.post("rc2-success")


def test_state_machine_parent_fail():
    sm = state.StateMachine()
    sm.post("parent-ready")
    sm.post("init-success")
    sm.post("quorum-full")
    assert sm.post("parent-fail") == ("run", "cleanup")


def test_config_values_of_an_object():
    """What `config load` checks: Flux's spellings read as fluxlite's, other
    components' tables and Flux keys of no meaning here left out, tables whole."""
    got = attrs.config_values({"tbon": {"torpid_max": "5s", "zmqdebug": 1},
                               "sched-fluxion-qmanager": {"queue-policy": "easy"},
                               "queues": {"debug": {}}, "batch": {"persist": False}}, "")
    assert got == {"tbon.torpid-timeout": "5s", "queues": '{"debug": {}}',
                   "batch.persist": "0"}


@pytest.mark.parametrize("obj,said", [
    ({"tbon": {"color": "red"}}, "^unknown key 'tbon.color'$"),
    ({"tbon": {"lost-timeout": "soon"}}, "^invalid value for tbon.lost-timeout"),
    ({"tbon": {"level": 2}}, "^tbon.level is set by the broker"),
    ({"queues": {"q": {"requires": 3}}}, "^queues.q.requires"),
])
def test_config_values_errors_name_the_key(obj, said):
    with pytest.raises(UsageError, match=said):
        attrs.config_values(obj, "")
    with pytest.raises(UsageError, match="^config x.toml: "):
        attrs.config_values(obj, "config x.toml")


def test_read_toml_reads_a_json_file(tmp_path):
    path = tmp_path / "c.json"
    path.write_text('{"tbon": {"topo": "kary:2"}}')
    assert attrs.read_toml(str(path)) == {"tbon": {"topo": "kary:2"}}
    path.write_text("[1]")
    with pytest.raises(UsageError, match="a JSON config is an object of tables"):
        attrs.read_toml(str(path))
