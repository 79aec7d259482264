"""`top -q QUEUE` through a real terminal (pexpect): a queue the instance has keeps
its jobs; one it does not have is one error line, exit 1, as Flux's top ('queue
NAME not configured'), instead of an empty screen."""

from __future__ import annotations

import pexpect
import pytest

from fluxlite.testing import fluxlite_command

pytestmark = pytest.mark.timeout(120)


def spawn(inst, *args):
    cmd = fluxlite_command()
    return pexpect.spawn(cmd[0], cmd[1:] + ["top", *args], env=inst.env, timeout=30,
                         encoding="utf-8", dimensions=(30, 110))


def test_top_q_names_a_configured_queue(instance_factory, tmp_path):
    conf = tmp_path / "queues.toml"
    conf.write_text("[queues.batch]\n[queues.debug]\n")
    inst = instance_factory(1, conf=str(conf))
    inst.cli("submit", "-q", "debug", "--job-name=indebug", "sleep", "60", check=True)
    child = spawn(inst, "-q", "debug", "-d", "0.3")
    try:
        child.expect_exact("indebug")
        child.send("q")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    child = spawn(inst, "-q", "nosuch")
    try:
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 1
    assert child.before.strip() == "fluxlite top: queue nosuch not configured"
    inst.cli("cancel", "--all", check=True)
