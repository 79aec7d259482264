"""A lab's machines as resources, through the CLI of real instances: the config of
issue 29 (GPUs, properties, two queues, a default queue) on --test-hosts=node[0-3],
EASY backfill around a blocked wide job, and tasks bound to their cores."""

import json
import os
from pathlib import Path

import pytest

from fluxlite.jobapi import api
from fluxlite.testing import wait_event
from fluxlite.util import fluid

LAB = (Path(__file__).parents[2] / "etc" / "lab-example.toml").read_text()


@pytest.fixture
def lab(instance_factory, tmp_path):
    conf = tmp_path / "conf.toml"
    conf.write_text(LAB)
    return instance_factory(4, start_args=["--test-hosts=node[0-3]",
                                           f"--config-path={conf}"])


def submit(inst, *args) -> int:
    return fluid.parse(inst.cli("submit", *args, check=True).stdout.strip())


def R_of(inst, jobid) -> dict:
    wait_event(inst.handle(), jobid, "alloc")
    return json.loads(inst.cli("job", "info", fluid.f58(jobid), "R", check=True).stdout)


def test_gpus_properties_and_queues(lab):
    out = lab.cli("resource", "list", check=True).stdout.splitlines()
    assert out[0].split() == ["STATE", "QUEUE", "PROPERTIES", "NNODES", "NCORES", "NGPUS",
                              "NODELIST"]
    assert out[1].split() == ["free", "batch", "batch", "2", "8", "4", "node[0-1]"]
    assert out[2].split() == ["free", "debug", "debug", "2", "8", "4", "node[2-3]"]

    # the default queue (batch: node0, node1), one GPU for the one task
    r = lab.cli("run", "-q", "batch", "-n1", "-g1", "printenv",
                "CUDA_VISIBLE_DEVICES", check=True)
    assert r.stdout == "0\n"
    # two one-GPU jobs on one node: GPUs 0 and 1
    first = submit(lab, "-n1", "-g1", "sleep", "60")
    r = lab.cli("run", "-n1", "-g1", "printenv", "CUDA_VISIBLE_DEVICES", check=True)
    assert r.stdout == "1\n"
    R = R_of(lab, first)
    assert R["execution"]["R_lite"] == [{"rank": "0", "children": {"core": "0", "gpu": "0"}}]
    assert R["execution"]["properties"] == {"batch": "0"}
    api.cancel(lab.handle(), first)
    wait_event(lab.handle(), first, "clean")
    # whole nodes with their GPUs
    r = lab.cli("run", "-N2", "-n2", "-g2", "-l", "printenv", "CUDA_VISIBLE_DEVICES",
                check=True)
    assert sorted(r.stdout.splitlines()) == ["0: 0,1", "1: 0,1"]
    # the debug queue's nodes are ranks 2 and 3
    r = lab.cli("run", "-q", "debug", "-N2", "-l", "fluxlite", "getattr",
                "rank", check=True)
    assert sorted(r.stdout.splitlines()) == ["0: 2", "1: 3"]
    # a constraint inside the queue
    jobid = submit(lab, "-q", "debug", "--requires=host:node3", "true")
    assert R_of(lab, jobid)["execution"]["nodelist"] == ["node3"]
    # unsatisfiable in that queue: the scheduler denies it (as Flux's), one line
    r = lab.cli("run", "-q", "batch", "-N3", "true")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip().splitlines()[-1].endswith(
        "type=alloc severity=0 unsatisfiable request in queue batch: need 3 exclusive "
        "node(s) with 1 core(s) each, only 2 eligible")
    r = lab.cli("submit", "-q", "nosuch", "true")
    assert r.returncode != 0 and "invalid queue 'nosuch' (queues: batch, debug)" in r.stderr


def test_a_stopped_queue_holds_its_jobs_while_the_other_runs(lab):
    r = lab.cli("queue", "stop")
    assert r.returncode != 0 and "name one, or use --all" in r.stderr
    r = lab.cli("queue", "stop", "true")     # as Flux's: the free argument is a queue
    assert r.returncode != 0 and "true" in r.stderr
    lab.cli("queue", "stop", "debug", "-m", "maintenance", check=True)
    status = lab.cli("queue", "status", check=True).stdout.splitlines()
    assert "debug: Scheduling is stopped: maintenance" in status
    assert "batch: Scheduling is started" in status
    held = submit(lab, "-q", "debug", "true")
    lab.cli("run", "-q", "batch", "true", check=True)
    assert api.info(lab.handle(), held)["state"] == "SCHED"
    lab.cli("queue", "start", "--queue", "debug", check=True)
    wait_event(lab.handle(), held, "clean")


def test_limits_and_default_duration(instance_factory, tmp_path):
    conf = tmp_path / "conf.toml"
    conf.write_text(LAB + 'jobspec.defaults.system.duration = "1h"\n'
                    'limits.job-size.max.ngpus = 2\n'
                    '[queues.debug.policy.limits]\nduration = "10m"\n')
    inst = instance_factory(4, start_args=["--test-hosts=node[0-3]",
                                           f"--config-path={conf}"])
    r = inst.cli("submit", "-n3", "-g1", "true")
    assert r.returncode != 0 and "job ngpus=3 exceeds the policy limit of 2" in r.stderr
    r = inst.cli("submit", "-q", "debug", "true")   # 1h default > 10m
    assert r.returncode != 0 and "exceeds the policy limit of 10m" in r.stderr
    jobid = submit(inst, "true")
    spec = json.loads(inst.cli("job", "info", fluid.f58(jobid), "jobspec", check=True).stdout)
    assert spec["attributes"]["system"]["duration"] == 3600
    assert spec["attributes"]["system"]["queue"] == "batch"


def test_bad_config_is_one_line_naming_file_and_key(tmp_path, instance_factory):
    conf = tmp_path / "bad.toml"
    conf.write_text('[queues.batch]\nrequire = ["batch"]\n')
    inst = instance_factory(1)
    r = inst.cli("start", f"--config-path={conf}", "true")
    assert r.returncode != 0
    assert r.stderr.strip().splitlines() == [
        f"fluxlite start: config {conf}: queues.batch.require: unknown key (allowed: "
        "requires, policy)"]
    conf.write_text(LAB)
    r = inst.cli("start", "--test-size=2", f"--config-path={conf}", "true")
    assert r.returncode != 0 and "host 'node0' is not in this instance" in r.stderr


def test_short_job_backfills_and_the_wide_one_starts_on_time(instance_factory, tmp_path):
    """Rank 0 is busy with a job that may run 60s; a wide job (both nodes) is
    reserved for its end.  A short job (10s limit) starts now on rank 1; a long one
    (200s) would hold rank 1 past the reservation and waits behind the wide job."""
    inst = instance_factory(2, cores_per_rank=2)
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    busy = submit(inst, "-N1", "-t", "60s", "sh", "-c", f"read x < {fifo}")
    wait_event(inst.handle(), busy, "start")
    wide = submit(inst, "-N2", "-t", "30s", "true")
    short = submit(inst, "-n1", "-t", "10s", "true")
    long_ = submit(inst, "-n1", "-t", "200s", "true")
    wait_event(inst.handle(), short, "clean")      # it ran while the wide one waits
    h = inst.handle()
    assert api.info(h, wide)["state"] == "SCHED"
    assert api.info(h, long_)["state"] == "SCHED"
    with open(fifo, "w") as f:   # the busy job ends: the wide one is next
        f.write("go\n")
    start_wide = wait_event(h, wide, "start")["timestamp"]
    start_long = wait_event(h, long_, "start")["timestamp"]
    end_busy = wait_event(h, busy, "finish")["timestamp"]
    assert end_busy <= start_wide <= start_long


def test_tasks_are_bound_to_their_cores(instance_factory):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 usable cores (this process may use "
                    f"{len(os.sched_getaffinity(0))})")
    inst = instance_factory(1, cores_per_rank=2)
    show = ["sh", "-c", "grep Cpus_allowed_list /proc/self/status | cut -f2"]
    first = submit(inst, "-n1", "sh", "-c", "grep Cpus_allowed_list /proc/self/status "
                   "| cut -f2; sleep 60")
    wait_event(inst.handle(), first, "start")
    r = inst.cli("run", "-n1", *show, check=True)
    R = R_of(inst, first)
    mine = R["execution"]["R_lite"][0]["children"]["core"]
    assert r.stdout.strip() != mine and r.stdout.strip() in ("0", "1")
    api.cancel(inst.handle(), first)
    r = inst.cli("run", "-n2", "-o", "cpu-affinity=per-task", "-l", *show, check=True)
    assert sorted(r.stdout.splitlines()) == ["0: 0", "1: 1"]
    r = inst.cli("run", "-n2", "-l", *show, check=True)      # on: all the job's cores
    assert sorted(r.stdout.splitlines()) == ["0: 0-1", "1: 0-1"]
    r = inst.cli("run", "-n1", "-o", "cpu-affinity=bogus", "true")
    assert r.returncode != 0 and "cpu-affinity must be on, off, per-task" in r.stderr


@pytest.mark.timeout(180)
def test_named_queue_state_survives_a_restart(instance_factory, tmp_path):
    conf = tmp_path / "conf.toml"
    conf.write_text(LAB)
    args = ["--test-hosts=node[0-3]", f"--config-path={conf}", f"-Sstatedir={tmp_path / 'sd'}"]
    a = instance_factory(4, start_args=args)
    a.cli("queue", "stop", "--queue", "debug", "-m", "new disks", check=True)
    a.cli("queue", "stop", "--queue", "batch", "--nocheckpoint", check=True)
    held = a.cli("submit", "-q", "debug", "true", check=True).stdout.strip()
    assert a.stop() == 0
    b = instance_factory(4, start_args=args)
    status = b.cli("queue", "status", check=True).stdout.splitlines()
    assert "debug: Scheduling is stopped: new disks" in status
    assert "batch: Scheduling is started" in status        # --nocheckpoint
    b.cli("run", "-q", "batch", "true", check=True)
    assert b.cli("jobs", "-n", "-o", "{id.f58} {state}", check=True).stdout.split() == \
        [held, "SCHED"]
    b.cli("queue", "start", "--queue", "debug", check=True)
    b.cli("job", "wait-event", held, "clean", check=True)


def test_a_nested_instance_offers_the_gpus_it_was_given(lab):
    r = lab.cli("alloc", "-q", "debug", "-N1", "sh", "-c",
                "fluxlite resource list -n -s all -o '{ngpus}'; "
                "fluxlite run -n1 -g1 printenv CUDA_VISIBLE_DEVICES", check=True)
    assert r.stdout.split() == ["2", "0"]


def _gpus() -> list[int]:
    from fluxlite.job import inventory
    return inventory.discover_gpus()[1]


@pytest.mark.skipif(not _gpus(), reason="no GPU on this machine (the NVIDIA driver and "
                    "nvidia-smi -L show none, and no AMD kfd): real-GPU checks skipped")
def test_real_gpus_one_per_job(instance_factory):
    """On a machine with GPUs: discovery offers them, `run -g1 nvidia-smi -L` sees one,
    and two one-GPU jobs on the node each see their own."""
    import shutil
    ngpus = len(_gpus())
    inst = instance_factory(1)
    out = inst.cli("resource", "list", "-n", "-s", "all", "-o", "{ngpus}", check=True).stdout
    assert out.split() == [str(ngpus)]
    if shutil.which("nvidia-smi") is None:
        pytest.skip("GPUs without nvidia-smi (AMD): the listing checks need nvidia-smi")
    lines = inst.cli("run", "-n1", "-g1", "nvidia-smi", "-L", check=True).stdout.splitlines()
    assert len([x for x in lines if x.startswith("GPU ")]) == 1
    if ngpus < 2:
        pytest.skip("one GPU: two jobs each with its own need two")
    first = submit(inst, "-n1", "-g1", "sh", "-c", "nvidia-smi -L; sleep 30")
    wait_event(inst.handle(), first, "start")
    second = inst.cli("run", "-n1", "-g1", "nvidia-smi", "-L", check=True).stdout
    api.cancel(inst.handle(), first)
    R = R_of(inst, first)
    assert R["execution"]["R_lite"][0]["children"]["gpu"] == "0"
    mine = inst.cli("job", "attach", fluid.f58(first)).stdout
    uuid = [line.split("UUID: ")[1] for line in (mine + second).splitlines() if "UUID: " in line]
    assert len(uuid) == 2 and uuid[0] != uuid[1]   # each job sees one GPU, its own


def test_a_flux_config_with_every_resource_key_starts_and_excludes(instance_factory,
                                                                   tmp_path):
    """Flux's [resource] keys beyond config (exclude, verify, norestrict, ...) and the
    tables of components fluxlite lacks, in a Flux config directory (its *.toml files
    merged), start an instance; the excluded host is shown as such, never scheduled."""
    conf = tmp_path / "conf.d"
    conf.mkdir()
    (conf / "other.txt").write_text("not read: only *.toml files are\n")
    (conf / "lab.toml").write_text(LAB.replace("noverify = true", """noverify = true
exclude = "node3"
norestrict = true
rediscover = true
journal-max = 1000
history = "30d"
[resource.verify]
gpu = "ignore\"""") + """
[sched-fluxion-qmanager]
queue-policy = "easy"
[sched-fluxion-resource]
match-policy = "lonodex"
[job-manager]
stop-queues-on-restart = false
[[job-manager.plugins]]
load = "mf_priority.so"
[access]
allow-root-owner = true
""")
    (conf / "tbon.toml").write_text('[tbon]\ntorpid_max = "30s"\n')
    inst = instance_factory(4, start_args=["--test-hosts=node[0-3]", f"--config-path={conf}"])
    assert inst.cli("getattr", "tbon.torpid-timeout", check=True).stdout == "30s\n"
    status = inst.cli("resource", "status", "-o", "{state} {nnodes} {nodelist}",
                      check=True).stdout.splitlines()
    assert status[1:] == ["avail 3 node[0-2]", "exclude 1 node3"]
    out = inst.cli("resource", "list", "-n", "-s", "all", "-o", "{queue} {nodelist}",
                   check=True).stdout.splitlines()
    assert out == ["batch node[0-1]", "debug node2"]
    r = inst.cli("resource", "drain", "3", "maintenance")
    assert r.returncode != 0
    assert "rank 3 is excluded by the configuration (resource.exclude)" in r.stderr
    # the debug queue has one node left
    r = inst.cli("run", "-q", "debug", "-N2", "true")   # denied by the scheduler
    assert r.returncode != 0 and "need 2 exclusive node(s) with 1 core(s) each, only 1 " \
        "eligible" in r.stderr
    r = inst.cli("run", "-q", "debug", "-N1", "hostname", check=True)
    assert r.returncode == 0


def test_a_bad_exclude_is_one_line(instance_factory, tmp_path):
    conf = tmp_path / "bad.toml"
    conf.write_text('[resource]\nexclude = "node7"\n')
    inst = instance_factory(1)
    r = inst.cli("start", "--test-size=2", "--test-hosts=node[0-1]",
                 f"--config-path={conf}", "true")
    assert r.returncode != 0
    assert r.stderr.strip().splitlines() == [
        "fluxlite start: resource.exclude 'node7': host 'node7' is not in this instance "
        "(hosts: node[0-1])"]
