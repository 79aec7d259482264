"""The job journal (job-manager.events-journal, fluxlite.jobapi.journal) against a real
instance: the history in timestamp order, the sentinel, then a new job's events as
they are logged; batches of history; full=False, since, timeouts and stop."""

import time

import pytest

from fluxlite.client.sync import Handle
from fluxlite.errors import ProtocolError, RPCTimeout, UsageError
from fluxlite.job import Jobspec
from fluxlite.jobapi import api
from fluxlite.jobapi.journal import SENTINEL, Journal
from fluxlite.service.job_manager.journal import JOURNAL_BATCH

pytestmark = pytest.mark.timeout(120)

WAIT = 60  # seconds any one bounded wait may take
MAIN = ["submit", "validate", "depend", "priority", "alloc", "start", "finish", "release",
        "free", "clean"]


def cmd(*argv, **kw):
    return Jobspec.from_command(list(argv), **kw)


@pytest.fixture
def inst(instance_factory):
    return instance_factory(1, cores_per_rank=4)


@pytest.fixture
def h(inst):
    h = Handle(inst.uri)
    yield h
    h.close()


def run_jobs(h, n, *argv):
    ids = [api.submit(h, cmd(*(argv or ("true",)))) for _ in range(n)]
    for jobid in ids:
        api.wait(h, jobid, timeout=WAIT)
    return ids


def until_sentinel(j):
    out = []
    while (e := j.poll(timeout=WAIT)) is not SENTINEL:
        assert e is not None
        out.append(e)
    return out


def test_history_then_sentinel_then_live_events_in_order(h):
    old = run_jobs(h, 2)
    j = Journal(h, include_sentinel=True).start()
    history = until_sentinel(j)
    assert [e["timestamp"] for e in history] == sorted(e["timestamp"] for e in history)
    for jobid in old:
        assert [e["name"] for e in history if e["id"] == jobid] == MAIN
    submit = next(e for e in history if e["name"] == "submit")
    assert submit["jobspec"]["tasks"][0]["command"] == ["true"]
    assert "environment" not in submit["jobspec"]["attributes"]["system"]  # redacted
    assert "R" in next(e for e in history if e["name"] == "alloc")
    assert set(submit["context"]) >= {"userid", "urgency"}

    new = api.submit(h, cmd("sh", "-c", "exit 3"))
    live = []
    while not live or live[-1]["name"] != "clean":
        e = j.poll(timeout=WAIT)
        assert e is not None and e is not SENTINEL
        live.append(e)
    assert {e["id"] for e in live} == {new}
    assert [e["name"] for e in live] == MAIN
    assert live[0]["jobspec"]["tasks"][0]["command"] == ["sh", "-c", "exit 3"]
    assert live[MAIN.index("alloc")]["R"]["execution"]["R_lite"]
    assert live[MAIN.index("finish")]["context"]["status"] == 3 << 8

    with pytest.raises(RPCTimeout):
        j.poll(timeout=0.2)   # nothing more is logged
    j.stop()
    assert j.poll(timeout=WAIT) is None
    assert j.poll(timeout=WAIT) is None


def test_history_comes_in_batches(h):
    ids = set(run_jobs(h, JOURNAL_BATCH + 6))
    responses = []
    for resp in h.stream("job-manager.events-journal", {"full": True}, timeout=WAIT):
        responses.append(resp)
        if not resp["jobs"]:
            break   # the sentinel
    assert [len(r["jobs"]) for r in responses] == [JOURNAL_BATCH, 6, 0]
    assert {job["id"] for r in responses for job in r["jobs"]} == ids


def test_without_full_only_active_jobs_and_no_sentinel_by_default(h):
    done = run_jobs(h, 1)[0]
    running = api.submit(h, cmd("sleep", "30"))
    for e in api.event_watch(h, running, timeout=WAIT):
        if e["name"] == "start":
            break
    j = Journal(h, full=False).start()
    names = []
    while "start" not in names:
        e = j.poll(timeout=WAIT)
        assert e is not None and e["id"] == running and e["id"] != done
        names.append(e["name"])
    assert names == MAIN[:MAIN.index("start") + 1]
    api.cancel(h, running)
    while (e := j.poll(timeout=WAIT))["name"] != "clean":
        assert e["id"] == running and e is not SENTINEL
    j.stop()
    assert j.poll(timeout=WAIT) is None


def test_since_skips_what_was_seen(h):
    first = run_jobs(h, 1)[0]
    j = Journal(h, include_sentinel=True).start()
    seen = until_sentinel(j)
    j.stop()
    last = max(e["timestamp"] for e in seen)
    second = run_jobs(h, 1)[0]
    j2 = Journal(h, since=last, include_sentinel=True).start()
    again = until_sentinel(j2)
    assert {e["id"] for e in again} == {second} and first != second
    assert [e["name"] for e in again] == MAIN
    j2.stop()


def test_poll_before_start_is_an_error(h):
    with pytest.raises(UsageError, match="before start"):
        Journal(h).poll(timeout=1)


def listeners(h):
    return h.call("job-manager.stats")["journal"]["listeners"]


def test_stop_and_a_vanished_client_end_the_stream_in_the_job_manager(inst, h):
    j = Journal(h, include_sentinel=True).start()
    until_sentinel(j)
    assert listeners(h) == 1
    j.stop()
    assert listeners(h) == 0   # the cancel went first on this connection
    assert j.poll(timeout=WAIT) is None
    other = Handle(inst.uri)
    j2 = Journal(other, include_sentinel=True).start()
    until_sentinel(j2)
    assert listeners(h) == 1
    other.close()
    deadline = time.monotonic() + 10
    while listeners(h) != 0:
        assert time.monotonic() < deadline, "a closed client's journal was never dropped"
        h.poll(0.01)
    jobid = api.submit(h, cmd("true"))   # posting to no listener is fine
    assert api.wait(h, jobid, timeout=WAIT)["success"]


def test_a_journal_request_without_the_streaming_flag_is_refused(h):
    with pytest.raises(ProtocolError, match="streaming flag"):
        h.call("job-manager.events-journal", {"full": True}, timeout=WAIT)
    assert listeners(h) == 0
