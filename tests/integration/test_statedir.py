"""Instances that outlive their brokers: -Sstatedir=DIR, through real instances and the CLI.

A clean restart brings back what Flux's does (inactive jobs with their
output, pending jobs with urgency, holds, dependencies and begin-times, the
queue stopped with its reason, drained ranks, KVS keys, increasing job ids;
running jobs canceled at shutdown).  A kill -9 of rank 0, or of every broker,
loses nothing that was acknowledged; jobs that were running end with an
exception saying so.  A damaged or foreign database and a directory in use
are refused at start with one line.
"""

import os
import signal
import sqlite3
import subprocess

import pytest

from fluxlite.testing import fluxlite_command, one_error_line
from fluxlite.util import fluid


def _ids(cp) -> list[str]:
    return cp.stdout.split()


def _table(inst) -> dict[str, tuple[str, str]]:
    """id -> (state, result) of every job, from `jobs -a`."""
    out = inst.cli("jobs", "-a", "-n", "-o", "{id.f58} {state} {result}", check=True).stdout
    rows = [line.split() for line in out.splitlines() if line.strip()]
    return {r[0]: (r[1], r[2] if len(r) > 2 else "") for r in rows}


def _restart(instance_factory, statedir, size=1):
    return instance_factory(size, setattrs=[f"statedir={statedir}"])


@pytest.mark.timeout(180)
def test_the_flux_scenario_survives_a_clean_restart(instance_factory, tmp_path):
    sd = tmp_path / "state"
    a = _restart(instance_factory, sd)
    echoes = _ids(a.cli("submit", "--cc=1-3", "echo", "hi", check=True))
    for j in echoes:
        a.cli("job", "wait-event", j, "clean", check=True)
    assert a.cli("run", "echo", "ran", check=True).stdout == "ran\n"
    held = a.cli("submit", "--urgency=hold", "echo", "held", check=True).stdout.strip()
    sleeper = a.cli("submit", "sleep", "300", check=True).stdout.strip()
    a.cli("job", "wait-event", sleeper, "start", check=True)
    a.cli("kvs", "put", "mykey=42", check=True)
    # pending work of every kind: a dependency on the held job, one on a finished job
    # (met already), a begin-time an hour away, an urgency
    dep = a.cli("submit", f"--dependency=afterany:{held}", "echo", "dep", check=True).stdout.strip()
    later = a.cli("submit", "--begin-time=+1h", "true", check=True).stdout.strip()
    a.cli("queue", "stop", "-m", "maintenance window", check=True)
    low = a.cli("submit", "--urgency=3", "echo", "low", check=True).stdout.strip()
    high = a.cli("submit", "--urgency=20", "echo", "high", check=True).stdout.strip()
    a.cli("resource", "drain", "0", "bad fan", check=True)
    before = _table(a)
    last = a.cli("job", "last", check=True).stdout.strip()
    assert a.stop() == 0

    b = _restart(instance_factory, sd)
    after = _table(b)
    assert set(after) == set(before)
    for j in echoes:
        assert after[j] == ("INACTIVE", "COMPLETED")
        assert b.cli("job", "attach", j, check=True).stdout == "hi\n"
    assert after[sleeper] == ("INACTIVE", "CANCELED")
    assert b.cli("job", "status", echoes[0]).returncode == 0
    assert b.cli("job", "status", sleeper).returncode != 0
    log = b.cli("job", "eventlog", sleeper, check=True).stdout
    assert 'type="cancel"' in log and "instance shutting down" in log
    assert after[held] == ("SCHED", "")
    assert after[dep] == ("DEPEND", "") and after[later] == ("DEPEND", "")
    assert after[low] == after[high] == ("SCHED", "")
    assert b.cli("jobs", "-n", "-o", "{id.f58}:{urgency}", "--filter=sched",
                 check=True).stdout.split() == [f"{high}:20", f"{low}:3", f"{held}:0"]
    assert b.cli("kvs", "get", "mykey", check=True).stdout.strip() == "42"
    assert b.cli("job", "last", check=True).stdout.strip() == last
    assert "maintenance window" in b.cli("queue", "status").stdout
    st = b.cli("resource", "status", "-o", "{state} {reason}", "-n", check=True).stdout
    assert "drained bad fan" in st
    # the queue starts: the pending jobs run in priority order; the held one stays
    b.cli("resource", "undrain", "0", check=True)
    b.cli("queue", "start", check=True)
    for j in (high, low):
        b.cli("job", "wait-event", j, "clean", check=True)
    assert _table(b)[held] == ("SCHED", "")
    # the dependency on the held job is met once it ends; ids keep increasing
    b.cli("job", "urgency", held, "default", check=True)
    b.cli("job", "wait-event", dep, "clean", check=True)
    assert b.cli("job", "attach", dep, check=True).stdout == "dep\n"
    new = b.cli("run", f"--dependency=afterok:{echoes[0]}", "echo", "after", check=True)
    assert new.stdout == "after\n"
    newest = fluid.parse(b.cli("job", "last", check=True).stdout.strip())
    assert newest > max(fluid.parse(j) for j in before)
    assert _table(b)[later] == ("DEPEND", "")


@pytest.mark.timeout(180)
def test_purge_limits_apply_to_restored_jobs(instance_factory, tmp_path):
    sd = tmp_path / "state"
    a = _restart(instance_factory, sd)
    a.cli("submit", "--cc=1-4", "--wait", "true", check=True)
    assert a.stop() == 0
    b = instance_factory(1, setattrs=[f"statedir={sd}", "job-manager.inactive-num-limit=2"])
    assert len(_table(b)) == 2
    assert b.stop() == 0
    c = _restart(instance_factory, sd)
    assert len(_table(c)) == 2
    # ids stay above the purged ones'
    a_id = fluid.parse(c.cli("submit", "true", check=True).stdout.strip())
    assert all(a_id > fluid.parse(j) for j in _table(c) if fluid.parse(j) != a_id)


FULL = ("{id.f58}|{state}|{result}|{name}|{ntasks}|{nnodes}|{ranks}|{returncode}|"
        "{exception.type}|{exception.note}|{queue}|{urgency}|{t_submit}|{t_run}|{t_inactive}")


def _full(inst) -> list[list[str]]:
    """Every job as `jobs -a` shows it."""
    out = inst.cli("jobs", "-a", "-n", "-o", FULL, check=True).stdout
    return [line.split("|") for line in out.splitlines()]


def _same(got: list[list[str]], want: list[list[str]]) -> bool:
    """The same jobs, fields and times (an eventlog entry's timestamp may follow the
    live table's by a microsecond: the job-manager's _stamp keeps them apart)."""
    return len(got) == len(want) and all(
        g[:-3] == w[:-3] and all(abs(float(a or 0) - float(b or 0)) < 1e-5
                                 for a, b in zip(g[-3:], w[-3:], strict=True))
        for g, w in zip(got, want, strict=True))


def _replayed(inst) -> list[str]:
    """How many inactive jobs the restart replayed rather than took from a summary."""
    out = inst.cli("dmesg", check=True).stdout
    return [w.split("=")[1] for line in out.splitlines() if "jobs rebuilt" in line
            for w in line.split() if w.startswith("inactive_replayed=")]


@pytest.mark.timeout(180)
def test_inactive_jobs_come_back_from_their_summaries_as_they_were(instance_factory,
                                                                   tmp_path):
    sd = tmp_path / "state"
    a = _restart(instance_factory, sd)
    a.cli("submit", "--cc=1-3", "--wait", "echo", "hi", check=True)
    a.cli("run", "-n2", "sh", "-c", "exit 3")
    held = a.cli("submit", "--urgency=hold", "true", check=True).stdout.strip()
    a.cli("cancel", held, check=True)
    a.cli("job", "wait-event", held, "clean", check=True)
    live = _full(a)
    assert len(live) == 5
    assert a.stop() == 0
    for _ in range(2):   # the first restart takes them from summaries too, as do later ones
        b = _restart(instance_factory, sd)
        assert _same(_full(b), live), (_full(b), live)
        assert _replayed(b) == ["0"]
        oldest = live[-1][0]   # an `echo hi`: its output is there
        assert b.cli("job", "attach", oldest, check=True).stdout == "hi\n"
        assert b.stop() == 0


def _crash(inst, ranks):
    pids = [inst.broker_pid(r) for r in ranks]
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    inst.proc.wait(timeout=60)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("every_broker", [False, True], ids=["rank0", "every-broker"])
def test_kill_9_loses_nothing_acknowledged(instance_factory, tmp_path, every_broker):
    sd = tmp_path / "state"
    a = _restart(instance_factory, sd, size=2)
    done = _ids(a.cli("submit", "--cc=1-4", "--wait", "echo", "out", check=True))
    pending = a.cli("submit", "--urgency=hold", "true", check=True).stdout.strip()
    running = a.cli("submit", "-N2", "sleep", "300", check=True).stdout.strip()
    a.cli("job", "wait-event", running, "start", check=True)
    a.cli("kvs", "put", "acked=yes", check=True)
    _crash(a, [0, 1] if every_broker else [0])

    b = _restart(instance_factory, sd, size=2)
    t = _table(b)
    for j in done:
        assert t[j] == ("INACTIVE", "COMPLETED")
        assert b.cli("job", "attach", j, check=True).stdout == "out\n"
    assert t[pending] == ("SCHED", "")
    assert t[running] == ("INACTIVE", "FAILED")
    log = b.cli("job", "eventlog", running, check=True).stdout
    assert 'type="exec"' in log and "rank 0 stopped while the job held resources" in log
    assert b.cli("kvs", "get", "acked", check=True).stdout.strip() == "yes"
    # its resources are free again: a job on both ranks runs
    assert b.cli("run", "-N2", "true").returncode == 0


def _start_fails(statedir, *extra):
    return subprocess.run(fluxlite_command() + ["start", f"-Sstatedir={statedir}", *extra,
                                                "true"],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.timeout(60)
def test_a_damaged_database_is_refused_in_one_line(tmp_path):
    sd = tmp_path / "state"
    sd.mkdir(mode=0o700)
    (sd / "content.sqlite").write_bytes(b"SQLite format 3\x00" + os.urandom(4080))
    cp = _start_fails(sd)
    line = one_error_line(cp)
    assert cp.returncode == 1
    assert "damaged" in line and str(sd / "content.sqlite") in line and "mv " in line


@pytest.mark.timeout(60)
def test_a_foreign_database_is_refused_in_one_line(tmp_path):
    sd = tmp_path / "state"
    sd.mkdir(mode=0o700)
    db = sqlite3.connect(sd / "content.sqlite")
    db.execute("CREATE TABLE accounts (name TEXT)")
    db.commit()
    db.close()
    cp = _start_fails(sd)
    line = one_error_line(cp)
    assert cp.returncode == 1
    assert "not a fluxlite state database" in line and str(sd) in line
    # nothing was written into it
    tables = sqlite3.connect(sd / "content.sqlite").execute(
        "SELECT name FROM sqlite_master").fetchall()
    assert tables == [("accounts",)]


@pytest.mark.timeout(120)
def test_two_instances_never_share_a_state_directory(instance_factory, tmp_path):
    sd = tmp_path / "state"
    a = _restart(instance_factory, sd)
    pid = a.broker_pid(0)
    cp = _start_fails(sd)
    line = one_error_line(cp)
    assert cp.returncode == 1
    assert "in use by another instance" in line and f"pid {pid}" in line
    # the first one is untouched
    assert a.cli("run", "true").returncode == 0


@pytest.mark.timeout(120)
def test_a_queue_stopped_with_nocheckpoint_starts_after_a_restart(instance_factory, tmp_path):
    sd = tmp_path / "state"
    a = _restart(instance_factory, sd)
    a.cli("queue", "stop", "--nocheckpoint", "-m", "just for now", check=True)
    assert "just for now" in a.cli("queue", "status", check=True).stdout
    assert a.stop() == 0
    b = _restart(instance_factory, sd)
    assert "Scheduling is started" in b.cli("queue", "status", check=True).stdout
    assert b.cli("run", "true").returncode == 0


@pytest.mark.timeout(120)
def test_a_disabled_queue_stays_disabled_after_a_restart(instance_factory, tmp_path):
    sd = tmp_path / "state"
    a = _restart(instance_factory, sd)
    a.cli("queue", "disable", "-m", "moving racks", check=True)
    assert a.stop() == 0
    b = _restart(instance_factory, sd)
    assert b.cli("queue", "status", check=True).stdout.splitlines()[0] == (
        "Job submission is disabled: moving racks")
    cp = b.cli("submit", "true")
    assert cp.returncode == 1 and "job submission is disabled: moving racks" in cp.stderr
    b.cli("queue", "enable", check=True)
    assert b.stop() == 0
    c = _restart(instance_factory, sd)
    assert c.cli("run", "true").returncode == 0
