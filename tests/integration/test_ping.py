"""`fluxlite ping` through the real CLI: a count, until interrupted, and
RANK!SERVICE targets."""

import pytest
from background import interrupt, lines_of

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("target,prefix", [
    ("1", "1!broker.ping"), ("1!broker", "1!broker.ping"), ("1!kvs", None),
    ("kvs", "0!kvs.ping"), ("any!broker", "broker.ping"),
])
def test_ping_count_and_targets(inst4, target, prefix):
    cp = inst4.cli("ping", "-c", "3", "-i", "0", target)
    if prefix is None:  # kvs runs on rank 0 only
        assert cp.returncode != 0 and len(cp.stderr.splitlines()) == 1, cp.stderr
        assert "kvs.ping" in cp.stderr
        return
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    assert len(lines) == 3
    for seq, line in enumerate(lines):
        assert prefix in line and f" pad=0 seq={seq} time=" in line and line.endswith(")")


def test_ping_repeats_until_interrupted(inst4):
    with inst4.cli_background("ping", "-i", "0.05", "2!broker") as p:
        lines = lines_of(p, 4)
        rc, err = interrupt(p)
    assert rc == 0 and err == ""
    assert [ln.split(" seq=")[1].split()[0] for ln in lines] == ["0", "1", "2", "3"]
    assert all(ln.startswith("2!broker.ping pad=0 ") for ln in lines)


@pytest.mark.parametrize("args,said", [
    (("x!broker",), "expected RANK!SERVICE"),
    (("1!",), "no service after '!'"),
    (("-r", "1", "2!broker"), "give one"),
    (("-c", "-1", "0"), "-1"),
])
def test_ping_bad_targets(inst1, args, said):
    cp = inst1.cli("ping", *args)
    assert cp.returncode != 0 and cp.stdout == ""
    assert len(cp.stderr.splitlines()) == 1 and said in cp.stderr, cp.stderr
