"""`submit --cc` streams: jobspecs are built, sent and counted in windows, so a large
IDSET holds little memory, and Ctrl-C stops submitting at once, says how many jobs
were submitted and exits 130."""

import signal
import subprocess

import pytest
from rawpeer import rss_kib

from fluxlite.testing import _readline, fluxlite_command

pytestmark = pytest.mark.timeout(180)


def test_ctrl_c_stops_a_large_cc_at_once_and_says_how_many(inst1):
    inst1.cli("queue", "stop", check=True)      # the jobs stay pending: only submit counts
    p = subprocess.Popen(fluxlite_command() + ["submit", "--cc=1-100000", "true"],
                         env=inst1.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    printed = 0
    try:
        while printed < 500:
            line = _readline(p.stdout, 60)
            assert line, "no job id printed within 60 s"
            printed += 1
        # the copies are made as they are sent, not all first
        assert rss_kib(p.pid) < 150 << 10
        p.send_signal(signal.SIGINT)
        rc = p.wait(30)
        while _readline(p.stdout, 10):    # the ids printed after ours, to the end
            printed += 1
        err = p.stderr.read().decode()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close()
        p.stderr.close()
    assert rc == 130, err
    assert err.strip() == f"fluxlite submit: interrupted: {printed} job(s) submitted", err
    cp = inst1.cli("jobs", "-a", "-n", "-o", "{id}")
    assert len(cp.stdout.split()) == printed < 2000
    inst1.cli("cancel", "--all", check=True)
    inst1.cli("queue", "start", check=True)


def test_cc_still_submits_every_copy_in_order(inst1):
    cp = inst1.cli("submit", "--cc=1-600", "--quiet", "true", check=True)
    assert cp.stdout == ""
    ids = inst1.cli("jobs", "-a", "-n", "-o", "{id.dec}", check=True).stdout.split()
    assert len(ids) == 600
    cp = inst1.cli("submit", "--cc=3-5", "echo", "{cc}", check=True)
    assert len(cp.stdout.split()) == 3
