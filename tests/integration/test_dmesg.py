"""`fluxlite dmesg` through the real CLI: -H human times and -d deltas, --follow
and --new until interrupted, options that do not go together."""

import pytest
from background import interrupt, lines_of

from fluxlite.testing import _readline

pytestmark = pytest.mark.timeout(120)


def test_dmesg_human_times(inst1):
    lines = inst1.cli("dmesg", "-H", check=True).stdout.splitlines()
    import re
    assert re.match(r"^\[[A-Z][a-z]{2}\d\d \d\d:\d\d\] broker\.info\[0\]: ", lines[0]), lines[0]
    assert any(re.match(r"^\[ *\+\d+\.\d{6}\] \w", ln) for ln in lines[1:]), lines
    delta = inst1.cli("dmesg", "-H", "-d", check=True).stdout.splitlines()
    assert len(delta) >= len(lines)


def test_dmesg_follow_prints_new_entries_until_interrupted(inst1):
    with inst1.cli_background("dmesg", "--follow") as p:
        backlog = lines_of(p, 1)
        assert "broker.info[0]" in backlog[0]
        inst1.cli("setattr", "exec.kill-timeout", "7s", check=True)
        seen = []
        while not any("attribute set" in ln and "7s" in ln for ln in seen):
            seen += lines_of(p, 1)
        rc, err = interrupt(p)
    assert rc == 0 and err == ""


def test_dmesg_new_follows_only_new_entries(inst4):
    inst4.cli("setattr", "-r", "2", "exec.kill-timeout", "9s", check=True)  # in the ring
    with inst4.cli_background("dmesg", "-n", "-r", "2") as p:
        # the stream starts an instant after the command does: log until it shows
        line = ""
        for n in range(1, 30):
            inst4.cli("setattr", "-r", "2", "exec.kill-timeout", f"{n}s", check=True)
            line = _readline(p.stdout, 1.0)
            if line:
                break
        assert "attribute set" in line and "[2]" in line and "9s" not in line, line
        rc, _ = interrupt(p)
    assert rc == 0


@pytest.mark.parametrize("args,said", [
    (("-d",), "--delta needs --human"),
    (("-H", "--json"), "do not go together"),
    (("-C", "-f"), "--clear does not go with --follow"),
])
def test_dmesg_bad_options(inst1, args, said):
    cp = inst1.cli("dmesg", *args)
    assert cp.returncode != 0 and cp.stdout == ""
    assert len(cp.stderr.splitlines()) == 1 and said in cp.stderr, cp.stderr
