"""`fluxlite top` through a real terminal (pexpect): the instance's cores busy and
free, jobs running first with their elapsed time, a nested instance entered with
Enter and left with q, and q at the top quits; off a terminal, one clear line."""

import os

import pexpect

from fluxlite.testing import fluxlite_command, jobid_of, one_error_line, wait_fifo
from fluxlite.util import fluid


def test_top_shows_resources_and_jobs_and_enters_a_nested_instance(instance_factory,
                                                                     tmp_path):
    inst = instance_factory(2, cores_per_rank=2)
    done = jobid_of(inst.cli("submit", "--job-name=finished", "--wait", "true", check=True))
    fifo = tmp_path / "inner"
    os.mkfifo(fifo)
    batch = jobid_of(inst.cli(
        "batch", "-N1", "--job-name=outer", "--wrap",
        "fluxlite submit --job-name=innerjob sleep 300 >/dev/null;"
        "fluxlite job wait-event $(fluxlite job last) start >/dev/null;"
        f"echo up > {fifo}; sleep 300", check=True))
    assert wait_fifo(fifo, timeout=60) == "up\n"
    cmd = fluxlite_command()
    child = pexpect.spawn(cmd[0], cmd[1:] + ["top", "-d", "0.3"], env=inst.env, timeout=30,
                          encoding="utf-8", dimensions=(30, 110))
    try:
        # the summary: 2 of 4 cores busy (the batch job holds one node), its two nodes up
        child.expect_exact("nodes 2/2 up")
        child.expect_exact("2/4 busy, 2 free")
        # the running batch job (an instance: ▸) is listed, then the finished one
        child.expect_exact("▸")
        child.expect_exact(fluid.f58(batch))
        child.expect_exact("outer")
        child.expect_exact(fluid.f58(done))
        child.expect_exact("finished")
        # Enter goes into the selected row: the running instance, first in the list
        child.send("\r")
        child.expect_exact(f"/ {fluid.f58(batch)} outer")
        child.expect_exact("innerjob")
        # q leaves it: the enclosing instance's jobs again
        child.send("q")
        child.expect_exact("finished")
        child.send("q")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    inst.cli("cancel", "--all", check=True)


def test_top_needs_a_terminal(inst1):
    cp = inst1.cli("top")
    assert cp.returncode == 1
    assert one_error_line(cp).startswith("fluxlite top: top needs a terminal")
