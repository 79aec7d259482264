"""`uri --wait` and the `?wait` query (with `?local`, joined by `&`) as Flux's jobid
resolver through the real CLI: a held instance's URI is printed once it starts; an
unknown query word is one error line."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(180)


def test_uri_waits_for_a_pending_instance(inst1):
    held = inst1.cli("batch", "--urgency=hold", "--wrap", "sleep", "60",
                     check=True).stdout.strip()
    assert inst1.cli("uri", held).returncode == 1          # no URI yet, no waiting
    with inst1.cli_background("uri", f"{held}?local&wait") as waiting:
        inst1.cli("job", "urgency", held, "default", check=True)
        out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0 and out.startswith("local://"), err
    assert inst1.cli("uri", "--wait", held, check=True).stdout == out
    cp = inst1.cli("uri", f"{held}?bogus")
    assert cp.returncode != 0 and "unsupported query ?bogus" in cp.stderr
    plain = inst1.cli("submit", "sleep", "60", check=True).stdout.strip()
    cp = inst1.cli("uri", "--wait", plain, timeout=30)    # not an instance: at once
    assert cp.returncode == 1 and "is not an instance" in cp.stderr
    inst1.cli("cancel", held, plain, check=True)
