"""`fluxlite jobs` against real instances: the Flux table, -o fields, --json, -f,
Flux's job-list order and the dependencies/success/inactive_reason fields."""

import json
import os
import pwd
import re

import pytest

from fluxlite.jobapi import api
from fluxlite.testing import jobid_of
from fluxlite.util import fluid, hostlist

HEADER = "       JOBID USER     NAME       ST NTASKS NNODES     TIME INFO"


def submit_wait(inst, *args) -> str:
    """Submit a job, wait for it to end; its F58 id (exit code not checked)."""
    return inst.cli("submit", "--wait", *args).stdout.split()[0]


def columns(line: str) -> dict:
    """Cut a default-table row at Flux's fixed column widths."""
    return {"id": line[0:12].strip(), "user": line[13:21].strip(), "name": line[22:32],
            "st": line[33:35].strip(), "ntasks": line[36:42].strip(),
            "nnodes": line[43:49].strip(), "time": line[50:58].strip(), "info": line[59:]}


def by_id(out: str) -> dict:
    return {line.split()[0]: line for line in out.splitlines()}


def wait_started(inst, jobid: int) -> None:
    for e in api.event_watch(inst.handle(), jobid):
        if e["name"] == "start":
            return


def test_default_table_has_flux_columns(inst4):
    host = inst4.getattr("hostname")
    ok = submit_wait(inst4, "-N2", "hostname")
    bad = submit_wait(inst4, "nosuchcommand")
    # a request that can never fit is a job denied by the scheduler (as Flux's)
    denied = inst4.cli("submit", "-N", "99", "true", check=True).stdout.strip()
    api.wait(inst4.handle(), fluid.parse(denied))
    # a job that ends before it runs keeps the node count it asked for
    cp = inst4.cli("submit", "-N3", f"--dependency=afterok:{bad}", "true")
    assert cp.returncode == 1 and "can never be satisfied" in cp.stderr
    never = cp.stdout.split()[0]
    api.wait(inst4.handle(), fluid.parse(never))
    assert inst4.cli("jobs", check=True).stdout.splitlines() == [HEADER]  # none active

    lines = inst4.cli("jobs", "-a", check=True).stdout.splitlines()
    assert lines[0] == HEADER
    rows = {columns(line)["id"]: columns(line) for line in lines[1:]}
    assert list(rows) == [never, denied, bad, ok]  # newest first
    user = pwd.getpwuid(os.getuid()).pw_name[:8]
    r = rows[ok]
    assert (r["user"], r["name"], r["st"], r["ntasks"], r["nnodes"], r["info"]) == \
        (user, "hostname  ", "CD", "2", "2", hostlist.encode([host] * 2))
    assert re.fullmatch(r"\d+\.\d{3}s", r["time"])
    r = rows[bad]
    assert (r["name"], r["st"], r["info"]) == ("nosuchcom+", "F", host)
    r = rows[never]
    assert (r["st"], r["ntasks"], r["nnodes"], r["time"], r["info"]) == ("F", "3", "3", "-", "")


def test_format_fields_and_no_header(inst1):
    done = submit_wait(inst1, "true")
    three = submit_wait(inst1, "sh", "-c", "exit 3")
    missing = submit_wait(inst1, "nosuchcommand")
    fmt = ("{id} {id.f58} {id.dec} {status} {status_abbrev} {result} {result_abbrev} "
           "{returncode} {ntasks} {ranks} {exception.type}")
    out = inst1.cli("jobs", "-a", "-n", "-o", fmt, check=True).stdout
    assert "JOBID" not in out
    rows = by_id(out)
    assert rows[done].split() == [done, done, str(fluid.parse(done)), "COMPLETED", "CD",
                                  "COMPLETED", "CD", "0", "1", "0"]
    assert rows[three].split()[3:] == ["FAILED", "F", "FAILED", "F", "3", "1", "0"]
    assert rows[missing].split()[3:] == ["FAILED", "F", "FAILED", "F", "127", "1", "0", "exec"]
    # a header for a custom format, with widths; a note; truncation with "+"
    out = inst1.cli("jobs", "-a", "-o", "{name:<6.6+}|{nnodes:>6}|{exception.note}",
                    check=True).stdout.splitlines()
    assert out[0] == "NAME  |NNODES|EXCEPTION-NOTE"
    notes = [line for line in out if line.startswith("nosuc+|")]
    assert len(notes) == 1 and "start failed" in notes[0]
    assert "true  |     1|" in out


def test_json_has_everything_and_ranks(inst4):
    jobid = submit_wait(inst4, "-N2", "true")
    jobs = json.loads(inst4.cli("jobs", "-a", "--json", check=True).stdout)["jobs"]
    (job,) = [j for j in jobs if j["id_f58"] == jobid]
    assert job["id"] == fluid.parse(jobid)
    assert job["ranks"] == "0-1" and job["nnodes"] == 2 and job["ntasks"] == 2
    assert job["state"] == "INACTIVE" and job["result"] == "COMPLETED"
    assert job["returncode"] == 0 and job["exception"] == {"occurred": False}
    assert job["t_run"] > 0 and job["runtime"] >= 0


def test_running_job_shows_R_then_canceled(inst1):
    host = inst1.getattr("hostname")
    jobid = inst1.cli("submit", "sleep", "30", check=True).stdout.strip()
    wait_started(inst1, fluid.parse(jobid))
    row = columns(inst1.cli("jobs", check=True).stdout.splitlines()[1])
    assert (row["id"], row["st"], row["info"]) == (jobid, "R", host)
    assert re.fullmatch(r"\d+\.\d{3}s", row["time"])
    fmt = "{id} {state} {state_single} {status} {runtime:.1f} {returncode}|{result}|"
    assert inst1.cli("jobs", "-n", "-o", fmt, check=True).stdout.split()[1:4] == \
        ["RUN", "R", "RUN"]
    assert inst1.cli("jobs", "-n", "-o", fmt, check=True).stdout.endswith(" ||\n")
    long = inst1.cli("jobs", "-o", "long", check=True).stdout.splitlines()
    assert long[0].split() == ["JOBID", "USER", "NAME", "STATUS", "NTASKS", "NNODES",
                               "T_SUBMIT", "T_REMAINING", "TIME", "INFO"]
    assert "     RUN " in long[1]
    api.cancel(inst1.handle(), fluid.parse(jobid))
    api.wait(inst1.handle(), fluid.parse(jobid))
    out = inst1.cli("jobs", "-a", "-n", "-o", "{id} {status_abbrev} {result} {exception.type}",
                    check=True).stdout
    assert out.split() == [jobid, "CA", "CANCELED", "cancel"]


def test_filter_by_state_and_result(inst1):
    done = submit_wait(inst1, "true")
    failed = submit_wait(inst1, "false")
    running = inst1.cli("submit", "sleep", "30", check=True).stdout.strip()
    wait_started(inst1, fluid.parse(running))

    def ids(*args):
        return inst1.cli("jobs", "-n", "-o", "{id}", *args, check=True).stdout.split()

    assert ids() == [running]
    assert ids("-a") == [running, failed, done]
    assert ids("-f", "failed") == [failed]
    assert ids("-f", "COMPLETED,Failed") == [failed, done]
    assert ids("-f", "inactive") == [failed, done]
    assert ids("-f", "pending,running") == [running]
    assert ids("-f", "run") == [running]
    assert ids("-f", "sched") == []
    assert ids(done) == [done]  # listed by id, in any state
    api.cancel(inst1.handle(), fluid.parse(running))


def test_bad_input_is_one_line(inst1):
    submit_wait(inst1, "true")
    for args, words in [
        (["-o", "{nosuch}"], ["{nosuch}", "{id}", "{name}"]),
        (["-o", "{nmae}"], ["{nmae}", "include {name}"]),
        (["-o", "wide"], ["No such format wide"]),
        (["-o", "{name:>x}"], ["--format"]),
        (["-o", "{name"], ["--format"]),
        (["-f", "bogus"], ["bogus", "completed"]),
        (["-c", "-1"], ["--count"]),
        (["nosuchjob"], ["nosuchjob"]),
    ]:
        cp = inst1.cli("jobs", "-a", *args)
        assert cp.returncode != 0, args
        assert cp.stdout == "", args
        assert len(cp.stderr.strip().splitlines()) == 1, cp.stderr
        assert cp.stderr.startswith("fluxlite jobs: ")
        for w in words:
            assert w in cp.stderr, (args, cp.stderr)


# ---------------------------------------------------------- Flux's order and fields


def f58_of(cp) -> str:
    return fluid.f58(jobid_of(cp))


def all_ids(inst) -> list[str]:
    return inst.cli("jobs", "-a", "-n", "-o", "{id.f58}", check=True).stdout.split()


def started(inst, f58: str) -> None:
    inst.cli("job", "wait-event", "-t", "60", f58, "start", check=True, timeout=90)


@pytest.mark.timeout(180)
def test_jobs_lists_in_flux_order(instance_factory):
    inst = instance_factory(1, cores_per_rank=2)
    r1 = f58_of(inst.cli("submit", "sleep", "300", check=True))
    started(inst, r1)
    r2 = f58_of(inst.cli("submit", "sleep", "300", check=True))
    started(inst, r2)
    sub = {}
    for name, args in (("a", ["--urgency=10"]), ("b", ["--urgency=20"]), ("c", []),
                       ("held", ["--urgency=hold"]), ("d", ["--urgency=20"]),
                       ("dep", [f"--dependency=afterany:{r1}"])):
        sub[name] = f58_of(inst.cli("submit", *args, "true", check=True))
    rows = [ln.split() for ln in
            inst.cli("jobs", "-n", "-o", "{id.f58} {state} {priority}.", check=True)
            .stdout.splitlines()]
    assert [r[0] for r in rows] == [sub["b"], sub["d"], sub["c"], sub["a"], sub["held"],
                                    sub["dep"], r2, r1]
    # a job in DEPEND has no priority yet
    assert rows[5] == [sub["dep"], "DEPEND", "."]
    assert rows[4] == [sub["held"], "SCHED", "0."]
    inst.cli("cancel", "--all", check=True)
    for f58 in all_ids(inst):
        inst.cli("job", "wait-event", "-t", "60", f58, "clean", check=True, timeout=90)
    # inactive: latest ended first
    ended = [(float(t), i) for i, t in (ln.split() for ln in inst.cli(
        "jobs", "-a", "-n", "-o", "{id.f58} {t_inactive}", check=True).stdout.splitlines())]
    assert ended == sorted(ended, reverse=True) and len(ended) == 8


@pytest.mark.timeout(180)
def test_jobs_fields_dependencies_success_inactive_reason(inst1):
    ok = inst1.cli("submit", "--wait", "true").stdout.split()[0]
    three = inst1.cli("submit", "--wait", "sh", "-c", "exit 3").stdout.split()[0]
    killed = inst1.cli("submit", "--wait", "sh", "-c", "kill $$").stdout.split()[0]
    held = f58_of(inst1.cli("submit", "--urgency=hold", "true", check=True))
    dep = f58_of(inst1.cli("submit", f"--dependency=afterok:{held}", "true", check=True))
    later = f58_of(inst1.cli("submit", "--begin-time=+1h", "true", check=True))
    fmt = "{id.f58}|{state}|{dependencies}|{success}|{inactive_reason}"
    rows = {ln.split("|")[0]: ln.split("|")[1:] for ln in
            inst1.cli("jobs", "-a", "-n", "-o", fmt, check=True).stdout.splitlines()}
    assert rows[dep] == ["DEPEND", f"after-success={held}", "", ""]
    assert rows[later][0:2] == ["DEPEND", rows[later][1]]
    assert rows[later][1].startswith("begin@")
    assert rows[ok][2:] == ["True", "Exit 0"]
    assert rows[three][2:] == ["False", "Exit 3"]
    assert rows[killed][2:] == ["False", "Terminated"]
    inst1.cli("cancel", "-m", "no more", held, check=True)
    inst1.cli("job", "wait-event", "-t", "60", dep, "clean", check=True, timeout=90)
    rows = {ln.split("|")[0]: ln.split("|")[1:] for ln in
            inst1.cli("jobs", "-a", "-n", "-o", fmt, check=True).stdout.splitlines()}
    assert rows[held][2:] == ["False", "Canceled: no more"]
    assert rows[dep][2] == "False"
    assert rows[dep][3].startswith(f"Exception: type=dependency note=dependency "
                                   f"after-success={held} ")
    headers = inst1.cli("jobs", "-o", "{dependencies} {success} {inactive_reason}",
                        check=True).stdout.splitlines()[0]
    assert headers.split() == ["DEPENDENCIES", "SUCCESS", "INACTIVE-REASON"]
