"""`jobs` formats as Flux prints them, through the real CLI: a time never reached
(t_inactive of a running job) is empty under !d and !D (so `-o endreason` shows `-`),
and a `+:` field widens from its own width (USER of the default format is at least 8
wide, as Flux's `+:{username:<8}`)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(120)


def test_a_time_never_reached_is_empty(inst1):
    jobid = inst1.cli("submit", "sleep", "30", check=True).stdout.strip()
    inst1.cli("job", "wait-event", "-t", "30", jobid, "start", check=True)
    end = inst1.cli("jobs", "-o", "endreason", jobid, check=True).stdout.splitlines()
    assert end[1].split()[3:] == ["R", "-"], end
    cp = inst1.cli("jobs", "-n", "-o", "{t_inactive!D}|{t_inactive!d:%H:%M::>6}|"
                   "{t_inactive!D:>4h}|{t_run!D}", jobid, check=True)
    empty, stamp, dash, started = cp.stdout.rstrip("\n").split("|")
    assert (empty, stamp, dash) == ("", "      ", "   -"), cp.stdout
    assert started.startswith("20") and "T" in started
    inst1.cli("cancel", jobid, check=True)


def test_expanding_fields_keep_their_own_width(inst1):
    inst1.cli("run", "true", check=True)
    header = inst1.cli("jobs", "-a", check=True).stdout.splitlines()[0]
    assert header.startswith("       JOBID USER     NAME       ST"), header
    cp = inst1.cli("jobs", "-a", "-c1", "-o", "+:{name:<12}|+:{name:<1}|", check=True)
    assert cp.stdout.splitlines() == ["NAME        |NAME|", "true        |true|"]


def test_a_sort_prefix_orders_the_rows_unless_sort_is_given(inst1):
    for name in ("b", "c", "a"):
        inst1.cli("run", f"--job-name={name}", "true", check=True)
    names = inst1.cli("jobs", "-a", "-o", "sort:name {name}", check=True).stdout.split()
    assert names == ["NAME", "a", "b", "c"]
    names = inst1.cli("jobs", "-a", "--suppress-header", "-o", "sort:-name {name}",
                      check=True).stdout.split()
    assert names == ["c", "b", "a"]
    names = inst1.cli("jobs", "-an", "--sort=name", "-o", "sort:-name {name}",
                      check=True).stdout.split()
    assert names == ["a", "b", "c"]


def test_emoji_fields_and_the_cute_format(inst1):
    inst1.cli("run", "true", check=True)
    utf8 = {"PYTHONIOENCODING": "utf-8"}
    cp = inst1.cli("jobs", "-a", "-c1", "-o", "cute", env=utf8, check=True)
    assert cp.stdout.splitlines()[1].split()[3] == "\U0001f600"
    cp = inst1.cli("jobs", "-an", "-c1", "-o", "{status_emoji}|{state_emoji}|{result_emoji}",
                   env=utf8, check=True)
    assert cp.stdout == "\U0001f600|\U0001f480|\U0001f600\n"
    cp = inst1.cli("jobs", "-an", "-c1", "-o", "{status_emoji}|{state_emoji}",
                   env={"PYTHONIOENCODING": "ascii"}, check=True)
    assert cp.stdout == ":-)|I\n"


def test_id_kvs_and_uri_local_fields(inst1):
    jobid = inst1.cli("batch", "--wrap", "sleep", "30", check=True).stdout.strip()
    inst1.cli("job", "wait-event", "-t", "60", jobid, "memo", check=True)
    cp = inst1.cli("jobs", "-n", "-o", "{id.kvs} {uri.local} {uri}", jobid, check=True)
    kvs, local, uri = cp.stdout.split()
    assert kvs == inst1.cli("job", "id", "--to=kvs", jobid, check=True).stdout.strip()
    assert local == uri and local.startswith("local://")
    inst1.cli("cancel", jobid, check=True)
