"""The job-manager's effect interpreters (service/job_manager/effects.py), driven
without a broker: a real job-manager and a real KVS service on one ServiceContext
whose requests to other services are recorded (with the one RPC tracker's
pending RPCs, answered by hand).  Each effect type's interpreter, the order of
commits and requests, and the table's check at import."""

import asyncio
import importlib.util
import pathlib
import re

import pytest

from fluxlite.job import actions as act
from fluxlite.job import depend, machine_io, states
from fluxlite.job import jobspec as js
from fluxlite.job.eventlog import job_key
from fluxlite.protocol.message import ROLE_OWNER, Message
from fluxlite.protocol.rpc import RPCTracker
from fluxlite.service import kvs_direct
from fluxlite.service.base import ServiceContext
from fluxlite.service.job_manager import JobManagerService, effects
from fluxlite.service.job_manager.submit import SubmitRequest
from fluxlite.service.kvs import KVSService
from fluxlite.util.handlers import handler_table

pytestmark = pytest.mark.timeout(30)

OWNER = 1000
CLIENT = b"\x01client"


class Harness:
    """A job-manager whose requests to sched and job-exec are kept, not sent."""

    def __init__(self):
        self.tracker = RPCTracker()
        self.requests: list[tuple[str, dict, object]] = []   # (topic, payload, pending)
        self.sent: list[tuple[str, dict]] = []                # requests wanting no answer
        self.responses: list[Message] = []
        self.log: list[str] = []      # commits and requests, in the order they happened
        ctx = ServiceContext(rank=0, size=2, owner=OWNER, hostname="h0", hosts=("h0", "h1"),
                             attrs={}, rpc=self._rpc, send=self._send,
                             respond=self.responses.append, publish=None,
                             state=lambda: "run", at_least=lambda s: False)
        self.kvs = KVSService(ctx)
        records = kvs_direct.view(self.kvs)      # what the broker gives the job-manager
        commit = records.commit
        records.commit = lambda ops: (self.log.append("commit"), commit(ops))[1]
        self.jm = JobManagerService(ctx, kvs=records)

    def _rpc(self, topic, payload=None, *, nodeid=None, streaming=False):
        p = self.tracker.new(topic, streaming)
        self.requests.append((topic, payload, p))
        self.log.append(topic)
        return p

    def _send(self, topic, payload=None, *, nodeid=None):
        self.sent.append((topic, payload))
        self.log.append(topic)

    def answer(self, pending, payload=None, errnum=0, errstr=""):
        msg = Message.request(pending.topic).response(payload, errnum, errstr)
        msg.matchtag = pending.matchtag
        self.tracker.dispatch(msg)

    def submit(self, spec=None, urgency=16) -> act.Job:
        """A job made as job-manager.submit makes it once sched found it feasible."""
        spec = spec or js.Jobspec.from_command(["true"]).jobspec
        r = SubmitRequest(jobspec=spec, urgency=urgency)
        jobid = self.jm._new_job(OWNER, r, self.jm_request(spec))["id"]
        return self.jm.jobs[jobid]

    @staticmethod
    def jm_request(spec):
        from fluxlite.job import schema as jschema
        return jschema.validate(spec)

    def eventlog(self, job) -> list[str]:
        return [e["name"] for e in self.kvs.lookup(job.key)]

    def stop(self):
        self.jm.stop()
        self.kvs.stop()


@pytest.fixture
def h():
    harness = Harness()
    yield harness
    harness.stop()


def _waiter(tag: int) -> Message:
    msg = Message.request("job-manager.wait", {}, matchtag=tag, userid=OWNER, role=ROLE_OWNER)
    msg.route = [CLIENT]
    return msg


# --------------------------------------------------------------- the table
def test_every_effect_type_has_its_interpreter():
    kinds = set(effects.EFFECTS)
    base = machine_io.Effect
    assert kinds == {c for c in vars(machine_io).values()
                     if isinstance(c, type) and issubclass(c, base) and c is not base}
    assert len(kinds) >= 12
    for kind, fn in effects.EFFECTS.items():
        assert fn is getattr(effects.Effects, "_on_" + kind.__name__)


def test_an_effect_left_out_of_the_table_is_refused():
    table = {k: v for k, v in effects.EFFECTS.items() if k is not act.Inactive}
    with pytest.raises(TypeError, match=r"no handler for Inactive \(add _on_Inactive\)"):
        handler_table(effects.Effects, machine_io.Effect, table)


def test_a_missing_interpreter_fails_at_import(tmp_path):
    """effects.py with one entry taken out of its table does not import."""
    src = pathlib.Path(effects.__file__).read_text()
    src = re.sub(r"from \.\.\.(\w)", r"from fluxlite.\1", src)
    assert "    act.Watch: Effects._on_Watch,\n" in src
    broken = tmp_path / "broken_effects.py"
    broken.write_text(src.replace("    act.Watch: Effects._on_Watch,\n", ""))
    spec = importlib.util.spec_from_file_location("broken_effects", broken)
    with pytest.raises(TypeError, match=r"no handler for Watch \(add _on_Watch\)"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


# ----------------------------------------------------- posts and requests
def test_a_submitted_job_is_written_then_asks_sched(h):
    job = h.submit()
    assert h.eventlog(job) == ["submit", "validate", "depend", "priority"]
    assert h.kvs.lookup(job_key(job.id, "jobspec"))["tasks"][0]["command"] == ["true"]
    # the entries went in one commit, made before the scheduler was asked
    assert h.log == ["commit", "sched.alloc"]
    topic, ask, _ = h.requests[0]
    assert ask == {"id": job.id, "request": job.req.wire(), "priority": job.priority,
                   "queue": "", "duration": 0}
    assert job.state == states.SCHED


def test_a_constrained_job_asks_with_its_constraint(h):
    spec = js.Jobspec.from_command(["true"]).jobspec
    spec["attributes"]["system"]["constraints"] = {"properties": ["gpu"]}
    h.submit(spec)
    assert h.requests[0][1]["constraint"] == {"properties": ["gpu"]}


def test_an_allocation_starts_the_job_with_its_jobspec_and_R(h):
    job = h.submit()
    h.answer(h.requests[0][2], {"id": job.id, "alloc": {"0": [0]}})
    topic, start, pending = h.requests[-1]
    assert topic == "job-exec.start" and pending.streaming
    assert start["id"] == job.id and start["userid"] == OWNER
    assert start["jobspec"] == h.kvs.lookup(job_key(job.id, "jobspec"))
    assert start["R"]["execution"]["R_lite"][0]["rank"] == "0"
    assert start["R"] == h.kvs.lookup(job_key(job.id, "R"))
    assert h.eventlog(job)[-1] == "alloc" and job.state == states.RUN
    # job-exec's answers come back as events: start, finish, release
    for answer in ({"type": "start"}, {"type": "finish", "data": {"status": 0}},
                   {"type": "release", "data": {"ranks": "all", "final": True}}):
        h.answer(pending, answer)
    assert h.eventlog(job)[-5:] == ["start", "finish", "release", "free", "clean"]
    assert job.state == states.INACTIVE and job.result == "COMPLETED"
    assert ("sched.free", {"id": job.id}) in h.sent


@pytest.mark.parametrize("effect, topic, payload", [
    (act.CancelAlloc(), "sched.cancel", {"id": 0}),
    (act.Prioritize(7), "sched.prioritize", {"id": 0, "priority": 7}),
    (act.Free(), "sched.free", {"id": 0}),
    (act.ForwardException({"id": 5, "type": "cancel"}), "job-exec.exception",
     {"id": 5, "type": "cancel"}),
])
def test_requests_that_want_no_answer(h, effect, topic, payload):
    job = h.submit()
    h.sent.clear()
    h.jm._apply(job, job.state, [effect])
    expected = {k: (job.id if k == "id" and v == 0 else v) for k, v in payload.items()}
    assert h.sent == [(topic, expected)]


def test_consecutive_posts_are_one_commit_before_the_next_request(h):
    job = h.submit()
    h.log.clear()
    h.jm._apply(job, job.state, [act.Post("memo", {"a": 1}), act.Post("memo", {"b": 2}),
                                 act.Prioritize(3), act.Post("memo", {"c": 3})])
    assert h.log == ["commit", "sched.prioritize", "commit"]
    assert h.eventlog(job)[-3:] == ["memo", "memo", "memo"]


def test_a_post_writes_its_extra_keys_with_the_entry(h):
    job = h.submit()
    h.jm._apply(job, job.state, [act.Post("memo", {"x": 1}, extra={"note": "hello"})])
    assert h.kvs.lookup(job_key(job.id, "note")) == "hello"
    stamps = [e["timestamp"] for e in h.kvs.lookup(job.key)]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)


# ------------------------------------------------- the table's own effects
def test_watch_links_a_dependent_to_a_known_target_only(h):
    target, job = h.submit(), h.submit()
    h.jm._apply(job, job.state, [act.Watch(target.id), act.Watch(999999)])
    assert target.dependents == [job]


def test_a_begin_timer_feeds_its_event_after_the_delay(h):
    job = h.submit()
    seen = []

    async def run():
        done = asyncio.Event()

        def handle(j, ev):
            seen.append((j, ev))
            done.set()

        h.jm._handle = handle
        h.jm._apply(job, job.state, [act.BeginTimer("begin-time=1", 0.01)])
        assert not seen          # later, not inside the call
        await asyncio.wait_for(done.wait(), 5)

    asyncio.run(run())
    assert seen == [(job, act.BeginTimeReached("begin-time=1"))]


def test_answer_waiters_answers_those_by_id_then_one_waiting_for_any(h):
    job = h.submit()
    by_id, any1, any2 = _waiter(1), _waiter(2), _waiter(3)
    job.waiters = [by_id]
    h.jm.any_waiters = [any1, any2]
    h.jm._handle(job, act.Raise("cancel", 0, "gone", None, OWNER))
    assert job.state == states.INACTIVE
    answered = [r.matchtag for r in h.responses]
    # the waiter by id has it; the job was waited for, so no waiter for any job gets it
    assert answered == [1]
    assert h.responses[0].payload["id"] == job.id and not h.responses[0].payload["success"]
    assert h.jm.any_waiters == [any1, any2]


def test_answer_waiters_gives_an_unwaited_job_to_the_first_waiting_for_any(h):
    job = h.submit()
    h.jm.any_waiters = [_waiter(2), _waiter(3)]
    h.jm._apply(job, job.state, [act.AnswerWaiters()])
    assert [r.matchtag for r in h.responses] == [2]
    assert [w.matchtag for w in h.jm.any_waiters] == [3]


def test_notify_dependents_judges_a_dependent_again(h):
    target = h.submit()
    spec = js.Jobspec.from_command(["true"]).jobspec
    spec["attributes"]["system"]["dependencies"] = [
        {"scheme": "afterany", "value": str(target.id)}]
    job = h.submit(spec)
    assert job.state == states.DEPEND and target.dependents == [job]

    async def run():
        h.jm._handle(target, act.Raise("cancel", 0, "", None, OWNER))   # target ends
        assert target.state == states.INACTIVE
        assert job.state == states.DEPEND      # judged again on a later turn, not inside
        while job.state == states.DEPEND:
            await asyncio.sleep(0)             # one turn of the loop

    asyncio.run(asyncio.wait_for(run(), 5))
    assert job.state == states.SCHED and "dependency-remove" in h.eventlog(job)
    assert target.dependents == []


def test_a_chain_of_dependents_ends_in_turns_not_nested_calls(h):
    """Two thousand jobs, each afterok the one before: the first is canceled and
    every other one ends (dependency), none in a nested call."""
    chain = [h.submit()]
    for _ in range(2000):
        spec = js.Jobspec.from_command(["true"]).jobspec
        spec["attributes"]["system"]["dependencies"] = [
            {"scheme": "afterok", "value": str(chain[-1].id)}]
        chain.append(h.submit(spec))

    async def run():
        h.jm._handle(chain[0], act.Raise("cancel", 0, "", None, OWNER))
        await asyncio.wait_for(h.jm._idle.wait(), 20)

    asyncio.run(run())
    assert {j.state for j in chain} == {states.INACTIVE}
    assert {j.fatal["type"] for j in chain[1:]} == {"dependency"}


def test_inactive_counts_the_job_out_and_answers_drain(h):
    job = h.submit()
    drain = _waiter(9)
    h.jm.drain_waiters.append(drain)
    assert h.jm.n_active == 1 and not h.jm._idle.is_set()
    h.jm._handle(job, act.Raise("cancel", 0, "", None, OWNER))
    assert h.jm.n_active == 0 and h.jm._idle.is_set()
    assert list(h.jm.inactive) == [job.id]
    assert [r.matchtag for r in h.responses] == [9] and h.jm.drain_waiters == []


def test_a_held_job_asks_nothing(h):
    job = h.submit(urgency=depend.URGENCY_HOLD)
    assert job.state == states.SCHED and h.requests == []
