"""batch --no-persist: every rank of the child instance is critical, so a killed
child broker ends the child instance at once, with an exception naming the rank
(the job used to run on degraded for minutes, then fail with no exception)."""

import os
import signal

import pytest

from fluxlite.jobapi import api
from fluxlite.testing import jobid_of
from fluxlite.util import fluid

pytestmark = pytest.mark.timeout(180)


def test_a_killed_child_broker_ends_a_no_persist_batch_at_once(instance_factory, tmp_path):
    inst = instance_factory(2)
    script = tmp_path / "s.sh"
    script.write_text("#!/bin/sh\nexec sleep 300\n")
    script.chmod(0o755)
    jobid = jobid_of(inst.cli("batch", "-N2", "--no-persist", "--output",
                              str(tmp_path / "out.txt"), str(script)))
    f58 = fluid.f58(jobid)
    inst.cli("job", "wait-event", "-t", "60", f58, "memo", check=True)
    cp = inst.cli("proxy", f58, "fluxlite", "getattr", "-r", "1", "broker.pid", check=True)
    os.kill(int(cp.stdout), signal.SIGKILL)
    result = api.wait(inst.handle(), jobid, timeout=60)
    assert not result["success"]
    st = inst.cli("jobs", "-a", "-n", "-o", "{exception.type}|{exception.note}", f58)
    etype, note = st.stdout.strip().split("|", 1)
    assert etype == "node-failure", st.stdout
    assert "broker rank 1" in note and "critical rank" in note, st.stdout
