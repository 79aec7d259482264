"""flux-ping(1)'s options through the real CLI: -b/--batch (every request sent
before the replies are read; needs --count) and -u/--userid (the userid and
rolemask the request reached the service with, as the service echoes them)."""

from __future__ import annotations

import os

import pytest

from fluxlite.testing import one_error_line

pytestmark = pytest.mark.timeout(120)


def test_batch_sends_count_then_reads_replies(inst4):
    cp = inst4.cli("ping", "-b", "-c", "4", "-i", "0", "3!broker", check=True)
    lines = cp.stdout.splitlines()
    assert [ln.split(" seq=")[1].split()[0] for ln in lines] == ["0", "1", "2", "3"]
    assert all(ln.startswith("3!broker.ping pad=0 seq=") for ln in lines)
    cp = inst4.cli("ping", "--batch", "--count=2", "--pad=5", "-i", "0", "kvs", check=True)
    assert [ln.split(" time=")[0] for ln in cp.stdout.splitlines()] == [
        "0!kvs.ping pad=5 seq=0", "0!kvs.ping pad=5 seq=1"]


def test_batch_needs_count(inst1):
    cp = inst1.cli("ping", "-b", "0")
    assert cp.stdout == ""
    assert one_error_line(cp) == "fluxlite ping: --batch should only be used with --count"


def test_userid_shows_who_asked(inst4):
    cp = inst4.cli("ping", "-u", "-c", "2", "-i", "0", "2", check=True)
    for seq, line in enumerate(cp.stdout.splitlines()):
        # the owner's uid and FLUX_ROLE_OWNER (0x1), between pad and seq as in Flux
        assert line.startswith(f"2!broker.ping pad=0 userid={os.getuid()} rolemask=0x1 "
                               f"seq={seq} time=")
    plain = inst4.cli("ping", "-c", "1", "2", check=True).stdout
    assert "userid=" not in plain
