"""`-S/--setattr KEY=VAL` keys as Flux's submission commands read them, through the
real CLI: a bare key goes under attributes.system, user./system. keys stay where they
say, `attributes.KEY` names the full path and a leading `.` a key under attributes."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.timeout(120)


def test_setattr_keys(inst1):
    cp = inst1.cli("submit", "--dry-run", "-S", "foo=1", "-S", "user.x=[1,2]", "-S",
                   ".top.level=yes", "-S", "attributes.user.deep.y=2", "-S",
                   "system.z", "true", check=True)
    attrs = json.loads(cp.stdout)["attributes"]
    assert attrs["system"]["foo"] == 1 and attrs["system"]["z"] == 1
    assert attrs["user"] == {"x": [1, 2], "deep": {"y": 2}}
    assert attrs["top"] == {"level": "yes"}
    # such a job runs; one with a key beside user and system is refused, as RFC 14 says
    cp = inst1.cli("run", "--setattr=.user.tag=t", "-S", "attributes.system.x=1", "echo", "ok")
    assert (cp.returncode, cp.stdout) == (0, "ok\n"), cp.stderr
    cp = inst1.cli("run", "--setattr=.extra=1", "true")
    assert cp.returncode == 1 and "extra" in cp.stderr
