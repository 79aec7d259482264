"""The [bootstrap] table: ranks from host names, URIs, parents, and clear errors."""

import os

import pytest

from fluxlite.broker import boot_config
from fluxlite.errors import NotFound, UsageError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "etc", "bootstrap-example.toml")


def flat(**extra):
    table = {"curve_cert": "/c.cert", "default_port": 8050,
             "default_bind": "tcp://*:%p", "default_connect": "tcp://%h:%p",
             "hosts": [{"host": "node[0-3]"}]}
    table.update(extra)
    return table


def test_flat_cluster_ranks_and_uris():
    cfg = boot_config.parse(flat())
    assert cfg.size == 4
    assert [e.host for e in cfg.hosts] == ["node0", "node1", "node2", "node3"]
    p0 = cfg.place("node0")
    assert (p0.rank, p0.size, p0.parent, p0.parent_endpoint) == (0, 4, None, None)
    assert p0.bind_endpoint == "tcp://*:8050"
    assert cfg.hosts[0].connect == "tcp://node0:8050"
    assert p0.children == (1, 2, 3)
    assert p0.topology.parents == [None, 0, 0, 0]
    assert p0.hosts == ("node0", "node1", "node2", "node3")
    p2 = cfg.place("node2")
    assert (p2.rank, p2.parent, p2.parent_endpoint) == (2, 0, "tcp://node0:8050")
    assert p2.bind_endpoint is None          # a leaf binds nothing
    assert p2.children == ()
    assert p2.curve is None and cfg.curve_cert == "/c.cert"   # keys: read by run()


def test_entry_keys_override_defaults_and_percent_tokens():
    cfg = boot_config.parse(flat(hosts=[
        {"host": "mgmt", "bind": "tcp://eth0:9001", "connect": "tcp://m-%h:9001"},
        {"host": "n[1-2]", "connect": "ipc:///tmp/%h.sock"},
    ]))
    assert cfg.hosts[0].bind == "tcp://eth0:9001"
    assert cfg.hosts[0].connect == "tcp://m-mgmt:9001"
    assert cfg.hosts[2].connect == "ipc:///tmp/n2.sock"
    assert cfg.place("n1").parent_endpoint == "tcp://m-mgmt:9001"
    assert boot_config.format_uri("tcp://a%%b:%p", "h", 1) == "tcp://a%b:1"


def test_parents_by_name_and_by_rank_make_a_tree():
    cfg = boot_config.parse(flat(hosts=[
        {"host": "r0"}, {"host": "r[1-2]"},
        {"host": "r[3-4]", "parent": "r1"}, {"host": "r5", "parent": 2},
    ]))
    assert cfg.parents == (None, 0, 0, 1, 1, 2)
    p1 = cfg.place("r1")
    assert p1.children == (3, 4)
    assert p1.bind_endpoint == "tcp://*:8050"
    assert cfg.place("r4").parent_endpoint == "tcp://r1:8050"
    assert cfg.place("r5").parent == 2


def test_no_hosts_is_one_broker():
    for table in ({}, {"hosts": []}):
        cfg = boot_config.parse(table)
        p = cfg.place("anything")
        assert (p.rank, p.size, p.parent, p.children, p.topology.parents) == \
            (0, 1, None, (), [None])


def test_the_example_file_parses_and_uses_every_key():
    cfg = boot_config.load(EXAMPLE)
    import tomllib
    with open(EXAMPLE, "rb") as f:
        table = tomllib.load(f)["bootstrap"]
    assert set(table) == set(boot_config.TABLE_KEYS)
    assert {k for e in table["hosts"] for k in e} == set(boot_config.HOST_KEYS)
    assert [e.host for e in cfg.hosts] == ["mgmt0", "node1", "node2", "node3", "node4",
                                           "node5", "node6"]
    assert cfg.parents == (None, 0, 0, 1, 1, 2, 2)
    assert cfg.place("node3").parent_endpoint == "tcp://node1:8050"
    assert cfg.place("node1").parent_endpoint == "tcp://mgmt0:9001"
    assert cfg.place("mgmt0").bind_endpoint == "tcp://eth0:9001"


@pytest.mark.parametrize("table,words", [
    ({"hots": []}, ["unknown key 'hots'", "allowed"]),
    (flat(hosts=[{"host": "a", "bnd": "x"}]), ["hosts[0]", "unknown key 'bnd'"]),
    (flat(hosts=[{"bind": "tcp://*:1"}]), ["hosts[0]", "host key is missing"]),
    (flat(hosts=[{"host": "n[0-2]"}, {"host": "n1"}]),
     ["hosts[1]", "'n1' is listed twice", "rank 1"]),
    (flat(hosts=[{"host": "n[0-"}]), ["hosts[0]", "host", "not closed"]),
    (flat(hosts=[{"host": "bad_name"}]), ["hosts[0]", "not a valid host name"]),
    (flat(hosts=[{"host": "a"}, {"host": "b", "parent": 7}]),
     ["hosts[1] (b)", "parent 7 is out of range", "0-1"]),
    (flat(hosts=[{"host": "a"}, {"host": "b", "parent": "zz"}]),
     ["hosts[1] (b)", "parent 'zz' is not a host"]),
    (flat(hosts=[{"host": "a"}, {"host": "b", "parent": "b"}]), ["(b)", "itself"]),
    (flat(hosts=[{"host": "a", "parent": "b"}, {"host": "b"}]), ["(a)", "rank 0"]),
    (flat(hosts=[{"host": "a"}, {"host": "b", "parent": "c"}, {"host": "c", "parent": "b"}]),
     ["hosts[1] (b)", "cycle", "b -> c -> b"]),
    (flat(default_port=70000), ["default_port", "1 to 65535"]),
    (flat(default_port="8050"), ["default_port"]),
    (flat(default_port=None, hosts=[{"host": "a"}, {"host": "b"}]),
     ["hosts[0] (a)", "default_bind", "%p is used but default_port is not set"]),
    (flat(default_bind="tcp://*:%q"), ["default_bind", "unknown token %q"]),
    (flat(default_bind="eth0:8050"), ["default_bind", "no scheme"]),
    (flat(default_bind="udp://*:1"), ["default_bind", "tcp or ipc"]),
    (flat(default_bind="tcp://*:*"), ["default_bind", "wildcard port"]),
    (flat(hosts=[{"host": "a", "connect": "ipc://" + "x" * 200}, {"host": "b"}]),
     ["hosts[0] (a)", "connect", "longer than 107"]),
    (flat(default_bind=None, hosts=[{"host": "a"}, {"host": "b"}]),
     ["hosts[0] (a)", "has children (ranks 1)", "no bind URI", "default_bind"]),
    (flat(curve_cert=None), ["curve_cert must be set", "fluxlite keygen"]),
    (flat(curve_cert=3), ["curve_cert must be a string"]),
    (flat(enable_ipv6="yes"), ["enable_ipv6", "true or false"]),
    (flat(hosts={"host": "a"}), ["hosts must be an array"]),
    (flat(hosts=["a"]), ["hosts[0] must be a table"]),
    ([1], ["must be a table"]),
])
def test_errors_name_the_key(table, words):
    with pytest.raises(UsageError) as info:
        boot_config.parse(table)
    for w in words:
        assert w in info.value.message, info.value.message


def test_unknown_hostname_is_a_clear_error():
    cfg = boot_config.parse(flat())
    with pytest.raises(UsageError, match=r"'login' is not in hosts \(node\[0-3\]\)"):
        cfg.place("login")


def test_insecure_allows_no_certificate():
    cfg = boot_config.parse(flat(curve_cert=None), insecure=True)
    assert cfg.curve_cert is None and cfg.place("node1").curve is None


def test_load_names_the_file(tmp_path):
    path = tmp_path / "boot.toml"
    path.write_text('[bootstrap]\nhosts = [{host = "a"}, {host = "a"}]\n')
    with pytest.raises(UsageError, match=f"config {path}: .*listed twice"):
        boot_config.load(str(path))
    path.write_text("[bootstrap\n")
    with pytest.raises(UsageError, match="not valid TOML"):
        boot_config.load(str(path))
    path.write_text("[tbon]\ntopo = 'kary:2'\n")
    with pytest.raises(UsageError, match="no \\[bootstrap\\] table"):
        boot_config.load(str(path))
    with pytest.raises(NotFound, match="cannot read config .*missing.toml: No such file"):
        boot_config.load(str(tmp_path / "missing.toml"))   # ENOENT kept, not EINVAL
