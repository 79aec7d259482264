"""The broker's log-level attributes read as Flux's do, through the real CLI: syslog's
numbers (7 debug, 6 info, 4 warning, 3 err), never names; a name is still taken by
setattr and at start, and read back as its number."""

from __future__ import annotations

import subprocess

import pytest

from fluxlite.testing import fluxlite_command

pytestmark = pytest.mark.timeout(120)


def get(inst, name: str) -> str:
    return inst.cli("getattr", name, check=True).stdout


def test_defaults_are_numbers(inst1):
    assert get(inst1, "log-stderr-level") == "3\n"       # LOG_ERR, Flux's default
    assert get(inst1, "log-level") == "6\n"              # LOG_INFO
    rows = dict(line.split(None, 1) for line in
                inst1.cli("lsattr", "-v", check=True).stdout.splitlines()
                if line.startswith("log-") and len(line.split()) == 2)
    assert rows["log-level"].strip() == "6" and rows["log-stderr-level"].strip() == "3"


def test_names_set_read_back_as_numbers(inst1):
    for name, number in (("debug", "7"), ("warning", "4"), ("err", "3"), ("info", "6")):
        inst1.cli("setattr", "log-level", name, check=True)
        assert get(inst1, "log-level") == number + "\n", name
    inst1.cli("setattr", "log-stderr-level", "critical", check=True)
    assert get(inst1, "log-stderr-level") == "2\n"
    cp = inst1.cli("setattr", "log-level", "loud")
    assert cp.returncode == 1 and len(cp.stderr.splitlines()) == 1
    assert "not a log level" in cp.stderr and "0-7" in cp.stderr
    assert get(inst1, "log-level") == "6\n"               # unchanged


def test_a_name_at_start_reads_back_as_its_number():
    cp = subprocess.run(fluxlite_command() + ["start", "-s", "1", "-S", "log-level=debug",
                                              "fluxlite", "getattr", "log-level"],
                        capture_output=True, text=True, timeout=60)
    assert (cp.returncode, cp.stdout) == (0, "7\n"), cp.stderr
