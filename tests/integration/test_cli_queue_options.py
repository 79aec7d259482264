"""flux-queue's command line as Flux's: QUEUE as the free argument of stop, start,
enable, disable and status (-q/--queue NAME its older form), the reason only with
-m, --quiet without a short form, list -q, disable --nocheckpoint, drain and idle
-t, through the real CLI on an instance with named queues."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

LAB = (Path(__file__).resolve().parents[2] / "etc" / "lab-example.toml").read_text()


@pytest.fixture
def lab(instance_factory, tmp_path):
    conf = tmp_path / "conf.toml"
    conf.write_text(LAB)
    return instance_factory(4, start_args=["--test-hosts=node[0-3]",
                                           f"--config-path={conf}"])


def lines(inst, *args) -> list[str]:
    return inst.cli("queue", *args, check=True).stdout.splitlines()


def test_queue_is_the_free_argument(lab):
    # a named queue's lines carry its name, as Flux's print_queue_status writes them
    assert lines(lab, "stop", "debug", "-m", "new disks") == \
        ["debug: Scheduling is stopped: new disks"]
    assert "debug: Scheduling is stopped: new disks" in lines(lab, "status")
    assert "batch: Scheduling is started" in lines(lab, "status")
    assert lines(lab, "status", "debug") == ["debug: Job submission is enabled",
                                             "debug: Scheduling is stopped: new disks"]
    # -v shows every queue, then (status, start, stop) the allocation counts
    verbose = lines(lab, "stop", "-v", "debug", "-m", "new disks")
    assert "batch: Scheduling is started" in verbose and verbose[-1].endswith("running jobs")
    assert lines(lab, "enable", "-v", "debug")[-1] == "debug: Job submission is enabled"
    assert lines(lab, "start", "--quiet", "-q", "debug") == []
    assert lines(lab, "status", "-q", "debug")[1] == "debug: Scheduling is started"
    lab.cli("queue", "disable", "batch", "-m", "moving", "--nocheckpoint", check=True)
    cp = lab.cli("submit", "-q", "batch", "true")
    assert cp.returncode != 0 and "moving" in cp.stderr
    lab.cli("queue", "enable", "batch", check=True)
    lab.cli("submit", "-q", "batch", "true", check=True)


def test_list_q_and_timeouts(lab):
    rows = lines(lab, "list", "-n", "-q", "debug", "-o", "{queue}")
    assert rows == ["debug"]
    assert lines(lab, "list", "-n", "-q", "batch,debug", "-o", "{queue}") == ["batch", "debug"]
    cp = lab.cli("queue", "list", "-q", "nosuch")
    assert cp.returncode == 2 and "unknown queue 'nosuch'" in cp.stderr
    assert lab.cli("queue", "drain", "-t", "30s", timeout=60).returncode == 0
    assert lines(lab, "idle", "-t", "30s", "--quiet") == []
