"""Pure logic of resources: inventory from Flux's [resource] config and from an R
file, GPU discovery on fixture inputs (captured `nvidia-smi -L`, a fake /proc and
kfd tree), RFC 31 constraints, queue policy, and the affinity plugin's sharing."""

import os
from pathlib import Path

import pytest

from fluxlite.broker import attrs
from fluxlite.errors import UsageError
from fluxlite.job import constraint, inventory, policy
from fluxlite.shell.plugins.affinity import share

ISSUE_CONFIG = (Path(__file__).parents[2] / "etc" / "lab-example.toml").read_text()

HOSTS = ("node0", "node1", "node2", "node3")


def test_issue_config_loads_into_an_inventory_and_queues(tmp_path):
    path = tmp_path / "conf.toml"
    path.write_text(ISSUE_CONFIG)
    values = attrs.load_config(str(path))
    assert values["resource.noverify"] == "1"
    inv = inventory.from_attrs({**attrs.defaults(), **values}, HOSTS)
    assert inv.cores == {r: [0, 1, 2, 3] for r in range(4)}
    assert inv.gpus == {r: [0, 1] for r in range(4)}
    assert inv.properties == {"batch": {0, 1}, "debug": {2, 3}}
    assert inv.props_of(2) == ["debug"]
    import json
    p = policy.Policy(json.loads(values["queues"]), json.loads(values["policy"]))
    assert p.names == ["batch", "debug"] and p.requires("debug") == ["debug"]
    assert p.queue_of({}) == "batch" and p.queue_of({"queue": "debug"}) == "debug"
    with pytest.raises(UsageError, match="invalid queue 'nope'"):
        p.queue_of({"queue": "nope"})


@pytest.mark.parametrize("text,words", [
    ("[resource]\nbogus = 1\n", "unknown key 'resource.bogus'"),
    ("[[resource.config]]\nhosts = \"n0\"\ncolor = \"red\"\n", "unknown key 'color'"),
    ("[[resource.config]]\ncores = \"0-1\"\n", "hosts is required"),
    ("[[resource.config]]\nhosts = \"n0\"\ncores = \"0-x\"\n", "resource.config[0].cores"),
    ("[queues.a]\nrequire = [\"x\"]\n", "queues.a.require: unknown key"),
    ("[policy]\nlimits.durashun = \"1h\"\n", "policy.limits.durashun: unknown key"),
    ("[policy]\nlimits.job-size.max.nodes = 2\n", "job-size.max.nodes: unknown key"),
    ("[policy]\nlimits.duration = \"soon\"\n", "policy.limits.duration"),
])
def test_bad_config_names_the_file_and_key(tmp_path, text, words):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(UsageError, match=f"config {path}") as exc:
        attrs.load_config(str(path))
    assert words in exc.value.message


def test_config_hosts_must_be_the_instance_s():
    entries = [{"hosts": "node[0-4]", "cores": "0"}]
    with pytest.raises(UsageError, match="host 'node4' is not in this instance"):
        inventory.from_config(entries, HOSTS)
    with pytest.raises(UsageError, match=r"no cores for rank\(s\) 2-3"):
        inventory.from_config([{"hosts": "node[0-1]", "cores": "0"}], HOSTS)


def test_default_queue_must_exist():
    with pytest.raises(UsageError, match="'x' is not a configured queue"):
        policy.Policy({"a": {}}, {"jobspec": {"defaults": {"system": {"queue": "x"}}}})
    with pytest.raises(UsageError, match="no default queue"):
        policy.Policy({"a": {}, "b": {}}).queue_of({})
    with pytest.raises(UsageError, match="no named queues"):
        policy.Policy().queue_of({"queue": "a"})


def test_limits_per_queue_override_the_instance_s():
    p = policy.Policy({"short": {"policy": {"limits": {"duration": "1m"}}}, "long": {}},
                      {"limits": {"duration": "1h", "job-size": {"max": {"nnodes": 2}}},
                       "jobspec": {"defaults": {"system": {"duration": "10m"}}}})
    p.check_limits("long", 3000, {"nnodes": 2})
    with pytest.raises(UsageError, match="exceeds the policy limit of 1m"):
        p.check_limits("short", 120, {"nnodes": 1})
    with pytest.raises(UsageError, match="job nnodes=3 exceeds the policy limit of 2"):
        p.check_limits("long", 60, {"nnodes": 3})
    with pytest.raises(UsageError, match="no time limit"):
        p.check_limits("long", 0, {"nnodes": 1})
    assert p.default_duration("short") == 600


def test_R_file_inventory(tmp_path):
    R = {"version": 1, "execution": {"R_lite": [
        {"rank": "0-1", "children": {"core": "0-7", "gpu": "0-3"}},
        {"rank": "2", "children": {"core": "0-1"}}], "properties": {"gpu": "0-1"}}}
    inv = inventory.from_R(R, 3, "R")
    assert inv.gpus == {0: [0, 1, 2, 3], 1: [0, 1, 2, 3]} and inv.cores[2] == [0, 1]
    assert inv.properties == {"gpu": {0, 1}}
    with pytest.raises(UsageError, match=r"no cores for rank\(s\) 3"):
        inventory.from_R(R, 4, "R")
    with pytest.raises(UsageError, match="not an R"):
        inventory.from_R({"execution": {}}, 1, "R")


# ----------------------------------------------------------- GPU discovery
SMI = """\
GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1b2c3d4e-0000-1111-2222-333344445555)
GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-6f7a8b9c-0000-1111-2222-333344445555)
  MIG 1g.10gb     Device  0: (UUID: MIG-abcdef)
"""


def test_nvidia_smi_listing():
    assert inventory.parse_nvidia_smi(SMI) == [0, 1]
    assert inventory.parse_nvidia_smi("No devices were found\n") == []


def _fake_nvidia(root, n):
    for i in range(n):
        d = root / "proc/driver/nvidia/gpus" / f"0000:{i:02x}:00.0"
        d.mkdir(parents=True)
        (d / "information").write_text("Model: \t NVIDIA H100\n")


def test_nvidia_proc_and_cuda_visible_devices(tmp_path):
    _fake_nvidia(tmp_path, 4)
    assert inventory.nvidia_proc(str(tmp_path)) == [0, 1, 2, 3]
    root = str(tmp_path)
    assert inventory.discover_gpus(root, {}) == ("nvidia", [0, 1, 2, 3])
    # an inherited CUDA_VISIBLE_DEVICES narrows and renumbers, as CUDA does
    assert inventory.discover_gpus(root, {"CUDA_VISIBLE_DEVICES": "2,3"}) == ("nvidia", [0, 1])
    assert inventory.discover_gpus(root, {"CUDA_VISIBLE_DEVICES": ""}) == ("nvidia", [])
    assert inventory.discover_gpus(root, {"CUDA_VISIBLE_DEVICES": "1,7,2"}) == ("nvidia", [0])
    assert inventory.discover_gpus(str(tmp_path / "none"), {}) == ("", [])


def test_amd_kfd_topology(tmp_path):
    nodes = tmp_path / "sys/class/kfd/kfd/topology/nodes"
    for i, simds in enumerate((0, 104, 104)):   # node 0 is the CPU
        (nodes / str(i)).mkdir(parents=True)
        (nodes / str(i) / "properties").write_text(f"cpu_cores_count 8\nsimd_count {simds}\n")
    assert inventory.amd_kfd(str(tmp_path)) == []   # no /dev/kfd: not used
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/kfd").write_text("")
    assert inventory.amd_kfd(str(tmp_path)) == [0, 1]
    assert inventory.discover_gpus(str(tmp_path), {"ROCR_VISIBLE_DEVICES": "1"}) == \
        ("amd", [0])


def _have_gpu() -> bool:
    return bool(inventory.discover_gpus()[1])


@pytest.mark.skipif(not _have_gpu(), reason="no GPU on this machine (nvidia-smi -L and "
                    "/proc/driver/nvidia/gpus show none, and no AMD kfd)")
def test_real_gpus_are_discovered():
    vendor, gpus = inventory.discover_gpus()
    assert vendor in ("nvidia", "amd") and gpus == list(range(len(gpus)))
    if vendor == "nvidia" and os.path.isdir("/proc/driver/nvidia/gpus"):
        assert len(gpus) <= len(os.listdir("/proc/driver/nvidia/gpus"))


# -------------------------------------------------------------- constraints
PROPS = {"batch": {0, 1}, "debug": {2, 3}, "big": {1, 3}}
ALL = {0, 1, 2, 3}


@pytest.mark.parametrize("text,ranks", [
    ("batch", {0, 1}), ("^batch", {2, 3}), ("-batch", {2, 3}), ("not batch", {2, 3}),
    ("host:node3", {3}), ("host:node[0-1]", {0, 1}), ("rank:1-2", {1, 2}),
    ("batch and big", {1}), ("batch big", {1}), ("batch&big", {1}),
    ("batch or host:node3", {0, 1, 3}), ("batch|debug", ALL),
    ("(batch or debug) and not big", {0, 2}), ("!(rank:0 | rank:3)", {1, 2}),
    ("property:debug", {2, 3}), ("nosuch", set()),
])
def test_requires_syntax(text, ranks):
    c = constraint.parse(text)
    assert constraint.ranks(c, ALL, PROPS, HOSTS) == ranks


def test_requires_json_shapes():
    assert constraint.parse("batch") == {"properties": ["batch"]}
    assert constraint.parse("host:node3") == {"hostlist": ["node3"]}
    assert constraint.parse("-batch") == {"not": [{"properties": ["batch"]}]}
    assert constraint.parse("a or b") == {"or": [{"properties": ["a"]}, {"properties": ["b"]}]}
    assert constraint.combine([{"properties": ["a"]}, None]) == {"properties": ["a"]}


@pytest.mark.parametrize("text,words", [
    ("", "empty"), ("(batch", "missing"), ("batch)", "unexpected"), ("and", "unexpected"),
    ("color:red", "unknown operator 'color'"), ("rank:x", "rank"), ("host:", "needs a value"),
    ("batch or", "missing at the end"), ("(" * 40 + "a" + ")" * 40, "too deeply"),
])
def test_requires_errors(text, words):
    with pytest.raises(UsageError, match=words):
        constraint.parse(text)


@pytest.mark.parametrize("bad,words", [
    ({"colour": ["a"]}, "unknown operator"), ({"properties": "a"}, "expected an array"),
    ({"ranks": ["0-x"]}, "ranks"), ({"and": [5]}, "expected an object"), ([], "object"),
])
def test_constraint_check(bad, words):
    with pytest.raises(UsageError, match=words):
        constraint.check(bad)


# -------------------------------------------------------------- affinity
@pytest.mark.parametrize("ids,n,mode,expect", [
    ([0, 1, 2, 3], 2, "on", [[0, 1, 2, 3], [0, 1, 2, 3]]),
    ([0, 1, 2, 3], 2, "per-task", [[0, 1], [2, 3]]),
    ([0, 1, 2], 2, "per-task", [[0, 1], [2]]),
    ([0, 1], 4, "per-task", [[0], [1], [0], [1]]),
    ([0, 1, 2, 3], 2, "off", [None, None]),
    ([0, 1, 2, 3], 2, "map:3;0-1", [[3], [0, 1]]),
    ([], 2, "on", [None, None]),
])
def test_affinity_shares(ids, n, mode, expect):
    assert [share(ids, n, mode, i) for i in range(n)] == expect


# A Flux system instance's config as a lab might copy it: every [resource] key
# flux-config-resource(5) documents, Flux's spellings in [tbon], [exec] and
# [job-manager], [access], policy.access/scheduler, and other components' tables.
FLUX_CONFIG = '''
[resource]
noverify = true
norestrict = true
rediscover = false
no-update-watch = true
journal-max = 1000
history = "30d"
scheduling = "/etc/flux/system/sched.json"
exclude = "node3"
[resource.verify]
default = "allow-extra"
gpu = "ignore"
[[resource.config]]
hosts = "node[0-3]"
cores = "0-1"
[tbon]
torpid_max = "45s"
tcp_user_timeout = "2m"
zmqdebug = 1
[exec]
imp = "/usr/libexec/flux/flux-imp"
service = "sdexec"
[job-manager]
inactive-age-limit = "7d"
stop-queues-on-restart = false
[[job-manager.plugins]]
load = "mf_priority.so"
[job-manager.housekeeping]
command = ["/bin/true"]
[access]
allow-guest-user = true
allow-root-owner = true
private-mode = true
[queues.batch]
requires = ["batch"]
policy.access.allow-user = ["alice"]
policy.access.allow-group = ["smurfs"]
policy.scheduler.queue-policy = "easy"
[policy]
jobspec.defaults.system.queue = "batch"
[sched-fluxion-qmanager]
queue-policy = "easy"
[sched-fluxion-resource]
match-policy = "lonodex"
[sched-simple]
alloc-limit = 8
[ingest.validator]
plugins = ["jobspec", "feasibility"]
[kvs]
checkpoint-period = "30m"
[heartbeat]
period = "5s"
[systemd]
enable = true
[archive]
period = "1m"
[site-plugin]
anything = 1
'''


def test_a_flux_system_config_loads(tmp_path):
    path = tmp_path / "flux.toml"
    path.write_text(FLUX_CONFIG)
    values = attrs.load_config(str(path))
    assert values["resource.exclude"] == "node3"
    assert values["tbon.torpid-timeout"] == "45s"            # Flux's torpid_max
    assert values["job-manager.inactive-age-limit"] == "7d"
    assert values["access.allow-guest-user"] == "1" and values["access.allow-root-owner"] == "1"
    assert not [k for k in values if k.startswith(("sched-", "ingest", "kvs", "site-"))]
    assert not [k for k in values if "verify" in k and k != "resource.noverify"]
    # the meaning kept: resource.exclude withholds node3
    inv = inventory.from_attrs({**attrs.defaults(), **values}, HOSTS)
    assert inv.excluded == {3}
    assert inv.wire()["resources"] == {str(r): [0, 1] for r in range(3)}


@pytest.mark.parametrize("text,words", [
    ("[resource]\nexcluded = \"0\"\n", "unknown key 'resource.excluded'"),
    ("[tbon]\ntorpid_maxx = \"1s\"\n", "unknown key 'tbon.torpid_maxx'"),
    ("[access]\nallow-guests = true\n", "unknown key 'access.allow-guests'"),
    ("[policy.access]\nallow-guest-user = true\n", "policy.access.allow-guest-user: unknown"),
    ("[policy.access]\nallow-user = \"alice\"\n", "policy.access.allow-user: expected an array"),
    ("typo = 1\n", "unknown key 'typo'"),
])
def test_typos_in_the_tables_fluxlite_reads_are_still_refused(tmp_path, text, words):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(UsageError) as exc:
        attrs.load_config(str(path))
    assert words in exc.value.message


def test_exclude_by_rank_or_host():
    assert inventory.exclude_ranks("", HOSTS) == set()
    assert inventory.exclude_ranks("0,2", HOSTS) == {0, 2}
    assert inventory.exclude_ranks("node[1,3]", HOSTS) == {1, 3}
    with pytest.raises(UsageError, match="rank 4 is not in this instance of size 4"):
        inventory.exclude_ranks("4", HOSTS)
    with pytest.raises(UsageError, match="host 'node9' is not in this instance"):
        inventory.exclude_ranks("node9", HOSTS)
    inv = inventory.Inventory(cores={0: [0], 1: [0]}, properties={"a": {1}, "b": {0}},
                              excluded={1})
    assert inv.wire()["properties"] == {"b": "0"}


def test_guests_are_admitted_as_the_access_table_says():
    from fluxlite.protocol.message import ROLE_OWNER, ROLE_USER
    from fluxlite.router.local import role_of
    owner = 1000
    assert role_of(owner, owner, guests=False, root_owner=False) == ROLE_OWNER
    assert role_of(0, owner, guests=False, root_owner=False) == 0        # refused
    assert role_of(0, owner, guests=True, root_owner=False) == ROLE_USER
    assert role_of(0, owner, guests=False, root_owner=True) == ROLE_OWNER
    assert role_of(1001, owner, guests=True, root_owner=True) == ROLE_USER


def test_a_config_directory_merges_its_toml_files_in_name_order(tmp_path):
    (tmp_path / "a.toml").write_text('[tbon]\ntopo = "kary:2"\n[resource]\ncores = "0-1"\n')
    (tmp_path / "b.toml").write_text('[tbon]\ntopo = "kary:4"\n[resource]\nexclude = "1"\n')
    (tmp_path / "c.json").write_text('not TOML, not read')
    values = attrs.load_config(str(tmp_path))
    assert values == {"tbon.topo": "kary:4", "resource.cores": "0-1",
                      "resource.exclude": "1"}
