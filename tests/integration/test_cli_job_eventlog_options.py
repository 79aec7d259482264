"""`job eventlog` and `job wait-event` with Flux's options, through the real CLI:
-f/--format text|json (-f was --follow, which is -F), -T raw|iso|offset, -H (the date
at each new minute, then offsets within it), -L; wait-event's -v, -c and -W."""

from __future__ import annotations

import json
import re

import pytest

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def done(inst1):
    jobid = inst1.cli("submit", "true", check=True).stdout.strip()
    inst1.cli("job", "wait", jobid, check=True)
    return jobid


def test_format_json_is_one_compact_object_a_line(inst1, done):
    lines = inst1.cli("job", "eventlog", "-f", "json", done, check=True).stdout.splitlines()
    assert [json.loads(line)["name"] for line in lines][:2] == ["submit", "validate"]
    assert all(", " not in line and ": " not in line for line in lines)
    again = inst1.cli("job", "eventlog", "--format=json", "-F", done, check=True).stdout
    assert again.splitlines() == lines


def test_time_formats(inst1, done):
    raw = inst1.cli("job", "eventlog", done, check=True).stdout.splitlines()
    assert re.fullmatch(r"\d+\.\d{6} submit userid=\d+ .*", raw[0])
    offset = inst1.cli("job", "eventlog", "-T", "offset", done, check=True).stdout
    assert offset.startswith("0.000000 submit ")
    iso = inst1.cli("job", "eventlog", "-T", "iso", done, check=True).stdout
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d) submit ", iso)
    human = inst1.cli("job", "eventlog", "-H", "-L", done, check=True).stdout.splitlines()
    assert re.fullmatch(r"\[[A-Z][a-z]{2}\d\d \d\d:\d\d\] submit .*", human[0]), human
    assert all(re.match(r"(\[ *\+\d+\.\d{6}\]|\[[A-Z][a-z]{2}\d\d \d\d:\d\d\]) ", line)
               for line in human[1:]), human
    assert re.match(r"\[  \+0\.\d{6}\] validate", human[1]), human


def test_wait_event_verbose_count_and_waitcreate(inst1, done):
    cp = inst1.cli("job", "wait-event", "-v", done, "start", check=True)
    names = [line.split()[1] for line in cp.stdout.splitlines()]
    assert names[0] == "submit" and names[-1] == "start" and "alloc" in names
    running = inst1.cli("submit", "sleep", "30", check=True).stdout.strip()
    for note in ("a=1", "b=2"):
        inst1.cli("job", "memo", running, note, check=True)
    cp = inst1.cli("job", "wait-event", "-c", "2", "-f", "json", running, "memo", check=True)
    assert json.loads(cp.stdout)["context"] == {"b": 2}
    inst1.cli("cancel", running, check=True)
    cp = inst1.cli("job", "wait-event", "-W", "-q", "-p", "exec", done, "done")
    assert (cp.returncode, cp.stdout) == (0, ""), cp.stderr
