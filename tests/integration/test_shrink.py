"""Shrink when a broker leaves cleanly: nothing restarts it, so its rank leaves the
resource set exactly as a lost one does, and work that no longer fits fails at
once instead of waiting in SCHED forever."""

import os
import signal

from fluxlite.client.sync import Handle
from fluxlite.jobapi import api
from fluxlite.testing import jobid_of
from fluxlite.util import fluid, idset


def wait_offline(h, rank: int, timeout: float = 30) -> None:
    for snap in h.stream("overlay.watch", nodeid=0, timeout=timeout):
        if rank in idset.decode(snap["ranks"].get("offline", "")):
            return
    raise AssertionError(f"rank {rank} never went offline")


def test_a_rank_that_left_is_shrunk_away(instance_factory):
    inst = instance_factory(3)
    h = inst.handle()
    inst.kill_broker(2, signal.SIGTERM)
    wait_offline(h, 2)
    cp = inst.cli("run", "-N3", "true", timeout=30)
    assert cp.returncode != 0 and "unsatisfiable request" in cp.stderr
    assert inst.cli("run", "-N2", "true", timeout=30).returncode == 0
    st = inst.cli("resource", "status", "-s", "offline", "-no", "{nnodes}", check=True)
    assert st.stdout.split() == ["1"]  # shown as offline, not as lost


def test_child_leaf_that_left_is_shrunk_and_full_size_jobs_fail(instance_factory):
    parent = instance_factory(2)
    ph = parent.handle()
    jobid = jobid_of(parent.cli("alloc", "-N2", "--bg", timeout=60))
    uri = parent.cli("uri", fluid.f58(jobid), check=True).stdout.strip()
    child = Handle(uri)
    try:
        pid = int(child.getattr("broker.pid", rank=1))
        os.kill(pid, signal.SIGTERM)
        wait_offline(child, 1)
        env = dict(parent.env, FLUXLITE_URI=uri)
        cp = parent.cli("run", "-N2", "true", env=env, timeout=30)
        assert cp.returncode != 0 and "unsatisfiable request" in cp.stderr
        assert parent.cli("run", "-N1", "true", env=env, timeout=30).returncode == 0
        nodes = parent.cli("resource", "list", "-s", "all", "-no", "{nnodes}", env=env,
                           check=True).stdout.split()
        assert nodes == ["1"]
    finally:
        child.close()
        parent.cli("cancel", fluid.f58(jobid))
        api.wait(ph, jobid, timeout=60)
