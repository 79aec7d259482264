"""Workflows through the CLI against real instances: urgency, holds and priority
order; RFC 26 after* dependencies (the DEPEND state, dependency-add/-remove,
dependency exceptions); begin-time; bad input."""

import datetime
import errno
import json
import time

import pytest

from fluxlite.errors import FluxliteError
from fluxlite.job import jobspec as js
from fluxlite.util import fluid

pytestmark = pytest.mark.timeout(120)


def submit(inst, *args) -> str:
    """Submit a job that must be accepted; its F58 id."""
    return inst.cli("submit", *args, check=True).stdout.split()[0]


def eventlog(inst, jobid: str) -> list[dict]:
    out = inst.cli("job", "eventlog", "--format=json", jobid, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def names(inst, jobid: str) -> list[str]:
    return [e["name"] for e in eventlog(inst, jobid)]


def stamp(inst, jobid: str, name: str) -> float:
    return next(e["timestamp"] for e in eventlog(inst, jobid) if e["name"] == name)


def field(inst, jobid: str, fmt: str) -> str:
    out = inst.cli("jobs", "-a", "-n", "-o", "{id} " + fmt, check=True).stdout
    rows = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in out.splitlines()}
    return rows[jobid]


def wait_ok(inst, jobid: str) -> None:
    cp = inst.cli("job", "wait", jobid)
    assert cp.returncode == 0, cp.stderr


def dependency_failed(inst, jobid: str, *words) -> None:
    """The job ended with a fatal `dependency` exception whose note holds `words`."""
    cp = inst.cli("job", "wait", jobid)
    assert cp.returncode == 1
    ex = [e for e in eventlog(inst, jobid) if e["name"] == "exception"]
    assert len(ex) == 1 and ex[0]["context"]["type"] == "dependency"
    assert ex[0]["context"]["severity"] == 0
    for w in words:
        assert w in ex[0]["context"]["note"], ex[0]["context"]["note"]
        assert w in cp.stderr
    assert "start" not in names(inst, jobid)
    assert field(inst, jobid, "{result}") == "FAILED"


def spec_value(inst, jobid: str) -> float:
    """The value of the job's last dependency, as its jobspec holds it."""
    spec = json.loads(inst.cli("job", "info", jobid, "jobspec", check=True).stdout)
    return spec["attributes"]["system"]["dependencies"][-1]["value"]


def started(inst, jobid: str) -> None:
    inst.cli("job", "wait-event", "-q", "-t", "60", jobid, "start", check=True)


# ---------------------------------------------------------------- urgency / holds

def test_urgency_names_and_priority_fields(inst1):
    ids = {u: submit(inst1, f"--urgency={u}", "true")
           for u in ("hold", "expedite", "default", "0", "5", "31")}
    want = {"hold": "0 0", "expedite": "31 4294967295", "default": "16 16", "0": "0 0",
            "5": "5 5", "31": "31 4294967295"}
    for u, jobid in ids.items():
        if u not in ("hold", "0"):
            wait_ok(inst1, jobid)
        assert field(inst1, jobid, "{urgency} {priority}") == want[u], u
    held = eventlog(inst1, ids["hold"])
    assert [e["name"] for e in held] == ["submit", "validate", "depend", "priority"]
    assert held[0]["context"]["urgency"] == 0 and held[-1]["context"]["priority"] == 0
    assert field(inst1, ids["hold"], "{state} {contextual_info}") == "SCHED held"


def test_hold_then_release(inst1):
    held = submit(inst1, "--urgency=hold", "echo", "released")
    later = submit(inst1, "true")
    wait_ok(inst1, later)  # a later job runs past the held one
    assert field(inst1, held, "{state} {priority}") == "SCHED 0"
    assert "alloc" not in names(inst1, held)
    cp = inst1.cli("job", "urgency", "-v", held, "default", check=True)
    assert cp.stdout == f"{held}: urgency changed from 0 to 16\n"
    wait_ok(inst1, held)
    log = eventlog(inst1, held)
    urg = [e for e in log if e["name"] == "urgency"]
    assert len(urg) == 1 and urg[0]["context"]["urgency"] == 16
    assert "userid" in urg[0]["context"]
    after = [e["name"] for e in log[log.index(urg[0]):]]
    assert after[:3] == ["urgency", "priority", "alloc"]
    assert inst1.cli("job", "attach", held, check=True).stdout == "released\n"


def test_hold_a_pending_job_and_expedite(instance_factory):
    inst = instance_factory(1, cores_per_rank=1)
    blocker = submit(inst, "sleep", "300")
    started(inst, blocker)
    a = submit(inst, "true")
    inst.cli("job", "urgency", a, "hold", check=True)
    assert field(inst, a, "{state} {urgency} {priority}") == "SCHED 0 0"
    b = submit(inst, "true")
    inst.cli("cancel", blocker, check=True)
    wait_ok(inst, b)
    assert field(inst, a, "{state}") == "SCHED"
    inst.cli("job", "urgency", a, "expedite", check=True)
    wait_ok(inst, a)
    assert field(inst, a, "{priority}") == "4294967295"


def test_higher_urgency_runs_first_on_a_full_instance(instance_factory):
    inst = instance_factory(1, cores_per_rank=1)
    blocker = submit(inst, "sleep", "300")
    started(inst, blocker)
    low = submit(inst, "--urgency=1", "true")
    mid = submit(inst, "true")
    mid2 = submit(inst, "true")
    high = submit(inst, "--urgency=30", "true")
    raised = submit(inst, "--urgency=2", "true")
    inst.cli("job", "urgency", raised, "20", check=True)  # moves up while pending
    inst.cli("cancel", blocker, check=True)
    for j in (low, mid, mid2, high, raised):
        wait_ok(inst, j)
    order = sorted((stamp(inst, j, "alloc"), j) for j in (low, mid, mid2, high, raised))
    assert [j for _, j in order] == [high, raised, mid, mid2, low]


def test_bad_urgency_is_one_line(inst1):
    for bad in ("32", "-1", "word", ""):
        cp = inst1.cli("submit", f"--urgency={bad}", "true")
        assert cp.returncode != 0 and cp.stdout == ""
        assert len(cp.stderr.splitlines()) == 1 and "urgency" in cp.stderr, cp.stderr
        assert "0 to 31" in cp.stderr
    done = submit(inst1, "--wait", "true")
    for args, word in (((done, "5"), "not pending"), ((done, "32"), "0 to 31"),
                       ((done, "soon"), "0 to 31"), (("nosuchjob", "5"), "jobid"),
                       ((fluid.f58(123456), "5"), "unknown job")):
        cp = inst1.cli("job", "urgency", *args)
        assert cp.returncode != 0
        assert len(cp.stderr.splitlines()) == 1 and word in cp.stderr, cp.stderr
    assert inst1.cli("jobs", "-a", "-n", "-o", "{id}", check=True).stdout.split() == [done]


def test_api_refuses_bad_urgency(inst1):
    h = inst1.handle()
    held = fluid.parse(submit(inst1, "--urgency=hold", "true"))
    for bad, errnum in ((32, errno.EINVAL), (-1, errno.EINVAL), ("hold", errno.EPROTO),
                        (True, errno.EPROTO)):
        with pytest.raises(FluxliteError) as info:
            h.call("job-manager.urgency", {"id": held, "urgency": bad}, timeout=10)
        assert info.value.errnum == errnum and "urgency" in info.value.message
    with pytest.raises(FluxliteError) as info:
        h.call("job-manager.submit",
               {"jobspec": js.Jobspec.from_command(["true"]).jobspec, "urgency": 32},
               timeout=10)
    assert info.value.errnum == errno.EINVAL
    assert h.call("job-manager.urgency", {"id": held, "urgency": 16},
                  timeout=10) == {"old_urgency": 0}
    assert h.call("job-manager.wait", {"id": held}, timeout=60)["success"]


# ------------------------------------------------------------------- dependencies

def test_dependency_stored_as_rfc26(inst1):
    first = submit(inst1, "--urgency=hold", "true")
    dec = str(fluid.parse(first))
    dep = submit(inst1, f"--dependency=afterok:{first}", f"--dependency=after:{dec}", "true")
    spec = json.loads(inst1.cli("job", "info", dep, "jobspec", check=True).stdout)
    assert spec["attributes"]["system"]["dependencies"] == [
        {"scheme": "afterok", "value": first}, {"scheme": "after", "value": dec}]
    assert field(inst1, dep, "{state}") == "DEPEND"
    assert field(inst1, dep, "{contextual_info}") == \
        f"depends:after-success={first},after-start={dec}"
    inst1.cli("job", "urgency", first, "default", check=True)
    wait_ok(inst1, dep)
    log = eventlog(inst1, dep)
    adds = [e["context"]["description"] for e in log if e["name"] == "dependency-add"]
    removes = [e["context"]["description"] for e in log if e["name"] == "dependency-remove"]
    assert adds == [f"after-success={first}", f"after-start={dec}"]
    assert sorted(removes) == sorted(adds)
    order = [e["name"] for e in log]
    assert order.index("depend") > max(i for i, n in enumerate(order)
                                       if n == "dependency-remove")


def test_after_satisfied_and_failed(inst1):
    running = submit(inst1, "sleep", "300")
    started(inst1, running)
    ok = submit(inst1, f"--dependency=after:{running}", "true")
    wait_ok(inst1, ok)  # it started: met while it still runs
    # met at submit: added and removed at once, as Flux's eventlog shows
    assert [(e["name"], e["context"]["description"]) for e in eventlog(inst1, ok)
            if e["name"].startswith("dependency-")] == [
        ("dependency-add", f"after-start={running}"),
        ("dependency-remove", f"after-start={running}")]
    inst1.cli("cancel", running, check=True)
    held = submit(inst1, "--urgency=hold", "true")
    dep = submit(inst1, f"--dependency=after:{held}", "true")
    assert field(inst1, dep, "{state}") == "DEPEND"
    inst1.cli("cancel", held, check=True)
    dependency_failed(inst1, dep, f"dependency after-start={held} job never started")
    # on a job that already ended without starting: ended at submit
    cp = inst1.cli("submit", f"--dependency=after:{held}", "true")
    assert cp.returncode == 1 and f"after-start={held} job never started" in cp.stderr


def test_afterany_satisfied_and_failed(inst1):
    bad = submit(inst1, "--urgency=hold", "false")
    dep = submit(inst1, f"--dependency=afterany:{bad}", "echo", "ran")
    assert field(inst1, dep, "{state}") == "DEPEND"
    inst1.cli("job", "urgency", bad, "default", check=True)
    wait_ok(inst1, dep)
    assert stamp(inst1, dep, "start") > stamp(inst1, bad, "finish")
    unknown = fluid.f58(123456789)
    cp = inst1.cli("submit", f"--dependency=afterany:{unknown}", "true")
    assert cp.returncode == 1 and len(cp.stderr.splitlines()) == 1
    assert f"dependency: afterany: id {unknown}: job not found" in cp.stderr
    jobid = cp.stdout.split()[0]
    dependency_failed(inst1, jobid, f"dependency: afterany: id {unknown}: job not found")


def test_afterok_satisfied_and_failed(inst1):
    good = submit(inst1, "--urgency=hold", "true")
    dep = submit(inst1, f"--dependency=afterok:{good}", "true")
    inst1.cli("job", "urgency", good, "16", check=True)
    wait_ok(inst1, dep)
    assert stamp(inst1, dep, "start") > stamp(inst1, good, "finish")
    # failing while the dependent waits
    bad = submit(inst1, "--urgency=hold", "false")
    dep = submit(inst1, f"--dependency=afterok:{bad}", "true")
    inst1.cli("job", "urgency", bad, "16", check=True)
    dependency_failed(inst1, dep, f"dependency after-success={bad} can never be satisfied",
                      "FAILED")
    # canceled while the dependent waits
    canceled = submit(inst1, "--urgency=hold", "true")
    dep = submit(inst1, f"--dependency=afterok:{canceled}", "true")
    inst1.cli("cancel", canceled, check=True)
    dependency_failed(inst1, dep, f"dependency after-success={canceled} job never started")
    # on one that already failed: ended at submit
    cp = inst1.cli("submit", f"--dependency=afterok:{bad}", "true")
    assert cp.returncode == 1
    assert f"after-success={bad} can never be satisfied" in cp.stderr


def test_afternotok_satisfied_and_failed(inst1):
    bad = submit(inst1, "--urgency=hold", "false")
    dep = submit(inst1, f"--dependency=afternotok:{bad}", "true")
    inst1.cli("job", "urgency", bad, "16", check=True)
    wait_ok(inst1, dep)
    good = submit(inst1, "--urgency=hold", "true")
    dep = submit(inst1, f"--dependency=afternotok:{good}", "true")
    inst1.cli("job", "urgency", good, "16", check=True)
    dependency_failed(inst1, dep, f"dependency after-failure={good} can never be satisfied",
                      "COMPLETED")
    # a job canceled before it started never failed: afternotok is not met (as Flux)
    held = submit(inst1, "--urgency=hold", "true")
    dep = submit(inst1, f"--dependency=afternotok:{held}", "true")
    inst1.cli("cancel", held, check=True)
    dependency_failed(inst1, dep, f"dependency after-failure={held} job never started")


def test_afterexcept_met_only_by_a_fatal_exception(inst1):
    running = submit(inst1, "sleep", "300")
    started(inst1, running)
    dep = submit(inst1, f"--dependency=afterexcept:{running}", "echo", "after")
    assert field(inst1, dep, "{state} {contextual_info}") == \
        f"DEPEND depends:after-except={running}"
    inst1.cli("cancel", running, check=True)
    wait_ok(inst1, dep)
    failed = submit(inst1, "false")
    inst1.cli("job", "wait", failed)    # failed by its exit code: no exception
    cp = inst1.cli("submit", f"--dependency=afterexcept:{failed}", "true")
    assert cp.returncode == 1
    assert f"after-except={failed} can never be satisfied" in cp.stderr


def test_failure_cascades_down_a_chain(inst1):
    root = submit(inst1, "--urgency=hold", "false")
    prev, chain = root, []
    for _ in range(5):
        prev = submit(inst1, f"--dependency=afterok:{prev}", "true")
        chain.append(prev)
    inst1.cli("job", "urgency", root, "default", check=True)
    # the first ran and failed; each later one's target ended before it started
    dependency_failed(inst1, chain[0],
                      f"dependency after-success={root} can never be satisfied")
    for up, j in zip(chain, chain[1:]):
        dependency_failed(inst1, j, f"dependency after-success={up} job never started")


def test_chain_of_20_afterok_jobs_runs_in_order(inst1):
    first = submit(inst1, "--urgency=hold", "true")
    chain = [first]
    for _ in range(19):
        chain.append(submit(inst1, f"--dependency=afterok:{chain[-1]}", "true"))
    states = inst1.cli("jobs", "-n", "-o", "{state}", check=True).stdout.split()
    assert states.count("DEPEND") == 19
    inst1.cli("job", "urgency", first, "default", check=True)
    wait_ok(inst1, chain[-1])
    logs = [eventlog(inst1, j) for j in chain]
    starts = [next(e["timestamp"] for e in log if e["name"] == "start") for log in logs]
    cleans = [next(e["timestamp"] for e in log if e["name"] == "clean") for log in logs]
    assert starts == sorted(starts)
    for i in range(1, 20):
        assert starts[i] > cleans[i - 1]


def test_bad_dependencies_are_one_line(inst1):
    for bad, word in (("afterok", "SCHEME:JOBID"), ("afterok:", "SCHEME:JOBID"),
                      ("sometime:1", "unknown scheme"), ("afterok:notanid", "not a job id"),
                      (":5", "SCHEME:JOBID")):
        cp = inst1.cli("submit", f"--dependency={bad}", "true")
        assert cp.returncode == 2 and cp.stdout == ""
        assert len(cp.stderr.splitlines()) == 1 and word in cp.stderr, cp.stderr
    assert inst1.cli("jobs", "-a", "-n", "-o", "{id}", check=True).stdout == ""


def test_api_refuses_bad_dependencies(inst1):
    h = inst1.handle()
    for deps, errnum, word in (
            ([{"scheme": "sometime", "value": "1"}], errno.EINVAL, "not supported"),
            ([{"scheme": "afterok", "value": "x!"}], errno.EINVAL, "not a job id"),
            ([{"scheme": "afterok", "value": 5}], errno.EPROTO, "dependencies[0].value"),
            ([{"scheme": "afterok"}], errno.EPROTO, "value"),
            ("afterok:1", errno.EPROTO, "dependencies"),
            ([{"scheme": "afterany", "value": "1"}] * 1025, errno.EINVAL, "dependencies")):
        spec = js.Jobspec.from_command(["true"]).jobspec
        spec["attributes"]["system"]["dependencies"] = deps
        with pytest.raises(FluxliteError) as info:
            h.call("job-manager.submit", {"jobspec": spec}, timeout=10)
        assert info.value.errnum == errnum, info.value.message
        assert word in info.value.message and "internal error" not in info.value.message
    assert h.call("job-manager.list", {"states": "all"})["jobs"] == []


# --------------------------------------------------------------------- begin-time

def test_begin_time_waits_in_depend(inst1):
    before = time.time()
    jobid = submit(inst1, "--begin-time=+2s", "true")
    spec = json.loads(inst1.cli("job", "info", jobid, "jobspec", check=True).stdout)
    (dep,) = spec["attributes"]["system"]["dependencies"]
    assert dep["scheme"] == "begin-time" and before + 2 <= dep["value"] <= time.time() + 2
    desc = f"begin-time={dep['value']:.3f}"
    at = datetime.datetime.fromtimestamp(dep["value"])  # shown as Flux's jobs does
    shown = (f"begin@{at:%H:%M}" if at.date() == datetime.date.today()
             else f"begin@{at:%b%d-%H:%M}") + (f":{at:%S}" if at.second else "")
    assert field(inst1, jobid, "{state} {contextual_info}") == f"DEPEND depends:{shown}"
    wait_ok(inst1, jobid)
    log = eventlog(inst1, jobid)
    add = next(e for e in log if e["name"] == "dependency-add")
    remove = next(e for e in log if e["name"] == "dependency-remove")
    assert add["context"]["description"] == remove["context"]["description"] == desc
    assert remove["timestamp"] >= dep["value"]
    assert stamp(inst1, jobid, "start") >= dep["value"]


def test_begin_time_clock_and_date_forms(inst1):
    now = datetime.datetime.now()
    ahead = now + datetime.timedelta(hours=2)
    clock = submit(inst1, f"--begin-time={ahead:%H:%M}", "true")
    past = submit(inst1, "--begin-time=2020-01-02 03:04", "--dependency=afterany:" + clock,
                  "true")
    spec = json.loads(inst1.cli("job", "info", past, "jobspec", check=True).stdout)
    assert spec["attributes"]["system"]["dependencies"][-1] == {
        "scheme": "begin-time", "value": datetime.datetime(2020, 1, 2, 3, 4).timestamp()}
    spec = json.loads(inst1.cli("job", "info", clock, "jobspec", check=True).stdout)
    at = spec["attributes"]["system"]["dependencies"][0]["value"]
    assert at == ahead.replace(second=0, microsecond=0).timestamp() or \
        at == (ahead.replace(second=0, microsecond=0) + datetime.timedelta(days=1)).timestamp()
    assert field(inst1, clock, "{state}") == "DEPEND"
    inst1.cli("cancel", clock, check=True)
    # the date is past: met at once (added and removed, as Flux's begin-time plugin
    # posts them); the job ran once the job it follows ended
    wait_ok(inst1, past)
    begin = f"begin-time={spec_value(inst1, past):.3f}"
    assert [(e["name"], e["context"]["description"]) for e in eventlog(inst1, past)
            if e["name"].startswith("dependency-")] == [
        ("dependency-add", f"after-finish={clock}"), ("dependency-add", begin),
        ("dependency-remove", begin), ("dependency-remove", f"after-finish={clock}")]


def test_bad_begin_time_is_one_line(inst1):
    for bad in ("some words", "+5x", "25:00", "2030-13-01", ""):
        cp = inst1.cli("submit", f"--begin-time={bad}", "true")
        assert cp.returncode == 2 and cp.stdout == ""
        assert len(cp.stderr.splitlines()) == 1 and "--begin-time" in cp.stderr, cp.stderr
        assert "+FSD" in cp.stderr
    assert inst1.cli("jobs", "-a", "-n", "-o", "{id}", check=True).stdout == ""


def test_singleton_runs_one_job_of_a_name_at_a_time(inst1):
    """--dependency=singleton (Flux's dependency-singleton): a job waits while another
    active job of the user has the same --job-name; waiting singletons go one at a
    time, in submit order."""
    first = submit(inst1, "--job-name=sim", "sleep", "300")
    started(inst1, first)
    a = submit(inst1, "--job-name=sim", "--dependency=singleton", "true")
    b = submit(inst1, "--job-name=sim", "--dependency=singleton", "true")
    alone = submit(inst1, "--job-name=other", "--dependency=singleton", "true")
    wait_ok(inst1, alone)          # no other job of that name: met at once
    for j in (a, b):
        assert field(inst1, j, "{state} {contextual_info}") == "DEPEND depends:singleton"
    inst1.cli("cancel", first, check=True)
    wait_ok(inst1, a)
    wait_ok(inst1, b)
    released = {j: next(e["timestamp"] for e in eventlog(inst1, j)
                        if e["name"] == "dependency-remove") for j in (a, b)}
    assert released[b] >= stamp(inst1, a, "clean")   # b went only once a had ended
    cp = inst1.cli("submit", "--dependency=singleton", "true")
    assert cp.returncode == 1
    assert "singleton jobs require a job name (--job-name)" in cp.stderr
