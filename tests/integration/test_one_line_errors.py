"""Errors that were tracebacks are one line: a format width too large to pad to, a
config file that is not text, a run directory on a full or read-only disk."""

import os
import subprocess

import pytest
from smalldisk import fill, small_disk

from fluxlite.testing import fluxlite_command, one_error_line

pytestmark = pytest.mark.timeout(120)

FL = fluxlite_command()


def fl(*args):
    return subprocess.run(FL + list(args), capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def test_a_huge_format_width_is_one_line(inst1):
    line = one_error_line(inst1.cli("jobs", "-o", "{id:>99999999999}"))
    assert line == ("fluxlite jobs: --format: width 99999999999 of {id} is too large "
                    "(at most 10000)")
    assert inst1.cli("jobs", "-a", "-o", "{id:>20}").returncode == 0


def test_a_binary_config_file_is_one_line(tmp_path):
    conf = tmp_path / "bin.conf"
    conf.write_bytes(b"\xa1\xff\x00binary\x80")
    line = one_error_line(fl("start", "--conf", str(conf), "true"))
    assert line == f"fluxlite start: config {conf} is not valid TOML: not UTF-8 text (byte 0)"


def test_a_rundir_on_a_full_disk_is_one_line(tmp_path):
    with small_disk(tmp_path / "disk", "4m") as disk:
        fill(disk)
        rd = os.path.join(disk, "rd")
        line = one_error_line(fl("start", "--rundir", rd, "true"))
        assert line == f"fluxlite start: --rundir: cannot write in {rd}: No space left on device"


def test_an_existing_rundir_on_a_read_only_disk_is_one_line(tmp_path):
    with small_disk(tmp_path / "disk", "4m") as disk:
        rd = os.path.join(disk, "rd")
        os.mkdir(rd, 0o700)
        cp = subprocess.run(["mount", "-o", "remount,ro", disk], capture_output=True,
                            text=True, timeout=30)
        assert cp.returncode == 0, cp.stderr
        line = one_error_line(fl("start", "--rundir", rd, "true"))
        assert line == f"fluxlite start: --rundir: cannot write in {rd}: Read-only file system"


@pytest.mark.parametrize("setting, words", [
    ("tbon.keepalive-period=1e-9s", "'1e-9s' is too short: at least 10ms"),
    ("tbon.torpid-timeout=1ms", "'1ms' is too short: at least 0.1s"),
    ("tbon.lost-timeout=0", "'0' must be longer than 0s"),
])
def test_a_period_or_timeout_below_its_minimum_is_refused(setting, words):
    """A keepalive every nanosecond was accepted and every broker spun at 100 %."""
    line = one_error_line(fl("start", "-S", setting, "true"))
    assert words in line and setting.split("=")[0] in line
