"""`fluxlite resource list | status | drain | undrain` against real instances."""

import json

from fluxlite.jobapi import api
from fluxlite.util import fluid
from fluxlite.util.hostlist import encode as hl

LIST_HEADER = "     STATE NNODES NCORES NGPUS NODELIST"
STATUS_HEADER = "     STATE UP NNODES NODELIST"  # as Flux's
UTF8 = {"LC_ALL": "C.UTF-8"}


def start_job(inst, *args) -> int:
    """Submit a job and return once it is running."""
    jobid = fluid.parse(inst.cli("submit", *args, check=True).stdout.strip())
    for e in api.event_watch(inst.handle(), jobid):
        if e["name"] == "start":
            return jobid
    raise AssertionError("job ended before it started")


def table(out: str) -> dict:
    """STATE -> the rest of its row, split on blanks."""
    return {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:]}


def test_list_free_and_allocated(instance_factory):
    inst = instance_factory(4, cores_per_rank=2)
    host = inst.getattr("hostname")
    out = inst.cli("resource", "list", check=True).stdout
    assert out.splitlines() == [LIST_HEADER,
                                f"      free      4      8     0 {hl([host] * 4)}",
                                " allocated      0      0     0 ",
                                "      down      0      0     0 "]

    jobid = start_job(inst, "-N2", "sleep", "30")
    rows = table(inst.cli("resource", "list", check=True).stdout)
    assert rows["free"] == ["2", "4", "0", hl([host] * 2)]
    assert rows["allocated"] == ["2", "4", "0", hl([host] * 2)]
    assert rows["down"] == ["0", "0", "0"]

    # a node with one core taken counts as free and as allocated
    start_job(inst, "-n1", "sleep", "30")
    out = inst.cli("resource", "list", "-n", "-s", "free,allocated,all,up",
                   "-o", "{state}:{nnodes}:{ncores}:{ranks}", check=True).stdout
    assert out.split() == ["free:2:3:2-3", "allocated:3:5:0-2", "all:4:8:0-3", "up:4:8:0-3"]

    view = json.loads(inst.cli("resource", "list", "--json", check=True).stdout)
    assert view["allocated"]["0"] == [0, 1] and view["free"]["3"] == [0, 1]
    api.cancel(inst.handle(), jobid)


def test_drain_and_undrain(instance_factory):
    inst = instance_factory(4, cores_per_rank=2)
    host = inst.getattr("hostname")
    out = inst.cli("resource", "status", env=UTF8, check=True).stdout
    assert out.splitlines() == [STATUS_HEADER, f"     avail  ✔      4 {hl([host] * 4)}"]

    assert inst.cli("resource", "drain", "3", "disk", "is", "full", check=True).stdout == ""
    out = inst.cli("resource", "status", env=UTF8, check=True).stdout
    assert out.splitlines() == [STATUS_HEADER,
                                f"     avail  ✔      3 {hl([host] * 3)}",
                                f"   drained  ✔      1 {host}"]
    out = inst.cli("resource", "status", "-n", "-s", "drained", "-o",
                   "{state} {up} {ranks} {reason}", env={"LC_ALL": "C"}, check=True).stdout
    assert out == "drained y 3 disk is full\n"
    assert "disk is full" in inst.cli("resource", "status", "-o", "long", check=True).stdout
    rows = table(inst.cli("resource", "list", check=True).stdout)
    assert rows["down"] == ["1", "2", "0", host]
    assert rows["free"] == ["3", "6", "0", hl([host] * 3)]
    listing = inst.cli("resource", "drain", check=True).stdout.splitlines()
    assert listing[0].split() == ["TIMESTAMP", "STATE", "RANKS", "REASON", "NODELIST"]
    assert len(listing) == 2 and listing[1].split()[2:] == ["drained", "3", "disk", "is",
                                                            "full", host]

    inst.cli("resource", "undrain", "3", check=True)
    assert table(inst.cli("resource", "status", check=True).stdout)["avail"][1] == "4"
    assert table(inst.cli("resource", "list", check=True).stdout)["down"][0] == "0"
    assert inst.cli("resource", "drain", check=True).stdout.splitlines()[1:] == []

    for args, words in [(["undrain", "3"], "rank 3 is not drained"),
                        (["drain", "9"], "invalid ranks '9'"),
                        (["undrain", "1-x"], "invalid idset '1-x'"),
                        (["list", "-s", "bogus"], "invalid state 'bogus'"),
                        (["status", "-s", "up"], "invalid state 'up'"),
                        (["list", "-o", "long"], "No such format long"),
                        (["status", "-o", "{nosuch}"], "unknown field {nosuch}")]:
        cp = inst.cli("resource", *args)
        assert cp.returncode != 0 and cp.stdout == "", args
        assert len(cp.stderr.strip().splitlines()) == 1, cp.stderr
        assert cp.stderr.startswith("fluxlite resource ") and words in cp.stderr, cp.stderr


def test_drained_rank_running_a_job_is_draining(instance_factory):
    inst = instance_factory(2, cores_per_rank=1)
    jobid = start_job(inst, "-N2", "sleep", "30")
    inst.cli("resource", "drain", "1", "going away", check=True)
    out = inst.cli("resource", "status", "-n", "-o", "{state} {ranks}", check=True).stdout
    assert out.splitlines() == ["avail 0", "draining 1"]
    listing = inst.cli("resource", "drain", "-n", check=True).stdout.split()
    assert listing[2:5] == ["draining", "1", "going"]
    api.cancel(inst.handle(), jobid)
    api.wait(inst.handle(), jobid)
    out = inst.cli("resource", "status", "-n", "-o", "{state} {ranks}", check=True).stdout
    assert out.splitlines() == ["avail 0", "drained 1"]


def test_redrain_needs_force_or_update(instance_factory):
    inst = instance_factory(4, cores_per_rank=1)

    def reasons():
        out = inst.cli("resource", "status", "-n", "-s", "drained",
                       "-o", "{ranks}:{reason}", check=True).stdout
        return out.split("\n")[:-1]
    inst.cli("resource", "drain", "1", "first", check=True)
    cp = inst.cli("resource", "drain", "1-2", "second")
    assert cp.returncode != 0 and cp.stderr.count("\n") == 1
    assert "rank 1 already drained" in cp.stderr, cp.stderr
    assert reasons() == ["1:first"]
    inst.cli("resource", "drain", "--update", "1-2", "second", check=True)
    assert reasons() == ["1:first", "2:second"]
    inst.cli("resource", "drain", "--force", "1-2", "third", check=True)
    assert reasons() == ["1-2:third"]
    cp = inst.cli("resource", "drain", "-f", "-u", "3")
    assert cp.returncode == 2 and "cannot be used together" in cp.stderr


def test_lost_rank_leaves_the_lists(instance_factory):
    inst = instance_factory(4, cores_per_rank=2)
    inst.kill_broker(3)
    inst.wait_membership(lambda s: s.get("lost") == {3}, timeout=5)
    out = inst.cli("resource", "status", "-n", "-o", "{state} {up} {ranks}",
                   env={"LC_ALL": "C"}, check=True).stdout
    assert out.splitlines() == ["avail y 0-2", "lost n 3"]
    st = json.loads(inst.cli("resource", "status", "--json", check=True).stdout)
    assert st["ranks"]["3"]["lost"] is True and st["ranks"]["0"]["online"] is True
    rows = table(inst.cli("resource", "list", "-s", "all,free,down", check=True).stdout)
    assert rows["all"][:2] == ["3", "6"] and rows["free"][:2] == ["3", "6"]
    assert rows["down"] == ["0", "0", "0"]


def test_list_without_a_scheduler_is_the_resource_services_view(instance_factory, tmp_path):
    """As Flux's: with the scheduler removed, `resource list` (info, R, queue list)
    prints the same view, made by the resource service (resource.sched-status)
    from the ranks' states and what the jobs hold."""
    conf = tmp_path / "queues.toml"
    conf.write_text("[queues.batch]\n[queues.debug]\n")
    inst = instance_factory(4, cores_per_rank=2, conf=str(conf))
    start_job(inst, "-q", "batch", "-N2", "-c2", "sleep", "300")
    commands = (["resource", "list"], ["resource", "list", "-s", "free,allocated"],
                ["resource", "list", "-q", "debug", "-i", "0-1"], ["resource", "info"],
                ["resource", "R"], ["queue", "list"])
    before = [inst.cli(*c, check=True).stdout for c in commands]
    inst.cli("module", "remove", "sched-simple", check=True)
    assert [inst.cli(*c, check=True).stdout for c in commands] == before
    inst.cli("resource", "drain", "3", check=True)
    rows = table(inst.cli("resource", "list", check=True).stdout)   # STATE QUEUE NNODES..
    assert rows["down"][1:3] == ["1", "2"] and rows["allocated"][1:3] == ["2", "4"]
    assert rows["free"][1:3] == ["1", "2"]
