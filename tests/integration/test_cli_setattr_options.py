"""`setattr` as Flux's through the real CLI: a VALUE may start with '-' (-1), but a
NAME that does (`setattr --expunge user.x`) is an unknown option, exit 2, not an
attribute named '--expunge'."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(60)


def test_only_the_value_may_look_like_an_option(inst1):
    cp = inst1.cli("setattr", "--expunge", "user.x")
    assert cp.returncode == 2 and "No such option '--expunge'" in cp.stderr
    assert "--expunge" not in inst1.cli("lsattr", check=True).stdout.split()
    inst1.cli("setattr", "user.n", "-1", check=True)
    assert inst1.cli("getattr", "user.n", check=True).stdout == "-1\n"
