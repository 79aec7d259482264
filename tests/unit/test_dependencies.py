"""Urgency names and priorities, --dependency URIs, dependency verdicts, the
jobspec's attributes.system.dependencies, and the scheduler's queue order."""

import pytest
from test_jobspec_and_sched import req, sched_with

from fluxlite.errors import ProtocolError, UsageError
from fluxlite.job import depend, easy
from fluxlite.job import jobspec as js
from fluxlite.job import schema as jschema
from fluxlite.service.sched import _Pending
from fluxlite.util import fluid

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("text,value", [("hold", 0), ("HOLD", 0), ("expedite", 31),
                                        ("default", 16), ("0", 0), ("31", 31), (" 7 ", 7)])
def test_parse_urgency(text, value):
    assert depend.parse_urgency(text) == value


@pytest.mark.parametrize("bad", ["32", "-1", "word", "", "1.5", "16x"])
def test_parse_urgency_rejects(bad):
    with pytest.raises(UsageError, match="0 to 31"):
        depend.parse_urgency(bad)


def test_priority_is_flux_default_plugin():
    assert depend.priority(0) == 0
    assert depend.priority(31) == 4294967295
    assert [depend.priority(u) for u in (1, 16, 30)] == [1, 16, 30]


def test_parse_uri():
    jid = fluid.f58(1234)
    assert depend.parse_uri(f"afterok:{jid}") == {"scheme": "afterok", "value": jid}
    assert depend.parse_uri("afternotok:1234") == {"scheme": "afternotok", "value": "1234"}
    assert depend.description({"scheme": "after", "value": "1234"}) == "after-start=1234"
    assert [depend.description({"scheme": s, "value": jid}) for s in depend.AFTER] == [
        f"{name}={jid}" for name in ("after-start", "after-start", "after-finish",
                                     "after-success", "after-failure", "after-except")]
    for bad, words in (("afterok", "SCHEME:JOBID"), ("begin:1", "unknown scheme"),
                       ("afterok:xyz!", "not a job id"), (":1", "SCHEME:JOBID")):
        with pytest.raises(UsageError, match=words):
            depend.parse_uri(bad)


@pytest.mark.parametrize("scheme,started,inactive,result,want", [
    ("afterstart", True, False, None, depend.MET),
    ("after", False, False, None, depend.WAIT),
    ("after", True, False, None, depend.MET),
    ("after", True, True, "FAILED", depend.MET),
    ("after", False, True, "CANCELED", depend.NEVER),
    ("afterany", True, False, None, depend.WAIT),
    ("afterany", False, True, "CANCELED", depend.MET),
    ("afterok", True, False, None, depend.WAIT),
    ("afterok", True, True, "COMPLETED", depend.MET),
    ("afterok", True, True, "FAILED", depend.NEVER),
    ("afterok", False, True, "CANCELED", depend.NEVER),
    ("afternotok", True, False, None, depend.WAIT),
    ("afternotok", True, True, "TIMEOUT", depend.MET),
    ("afternotok", True, True, "COMPLETED", depend.NEVER),
    ("afternotok", False, True, "CANCELED", depend.NEVER),   # never ran: never failed
    ("afterexcept", True, False, None, depend.WAIT),
    ("afterexcept", True, True, "FAILED", depend.NEVER),     # no exception: its exit code
])
def test_verdict(scheme, started, inactive, result, want):
    verdict, why = depend.verdict(scheme, 1234, started=started, inactive=inactive,
                                  result=result)
    assert verdict == want
    if want == depend.NEVER:
        desc = depend.description({"scheme": scheme, "value": fluid.f58(1234)})
        reason = "job never started" if not started else \
            f"can never be satisfied (the job's result: {result})"
        assert why == f"dependency {desc} {reason}"
    else:
        assert why == ""


def test_afterexcept_is_met_by_a_fatal_exception_only():
    def verdict(excepted):
        return depend.verdict("afterexcept", 1, started=True, inactive=True,
                              result="CANCELED" if excepted else "FAILED",
                              excepted=excepted)[0]
    assert (verdict(True), verdict(False)) == (depend.MET, depend.NEVER)


def test_jobspec_accepts_dependencies_within_bounds():
    spec = _with_system({"dependencies": [
        {"scheme": "afterok", "value": "1234"}, {"scheme": "after", "value": fluid.f58(9),
                                                 "extra": 1}]})
    jschema.validate(spec)
    spec["attributes"]["system"]["dependencies"] = [
        {"scheme": "afterany", "value": "1"}] * depend.MAX_DEPENDENCIES
    jschema.validate(spec)
    for deps, exc, words in (
            ([{"scheme": "afterany", "value": "1"}] * (depend.MAX_DEPENDENCIES + 1),
             UsageError, "dependencies"),
            ([{"scheme": "afterok", "value": "x" * 257}], UsageError, "value"),
            ([{"scheme": "", "value": "1"}], UsageError, "scheme"),
            ([{"scheme": "afterok", "value": 1}], ProtocolError, "value"),
            ([{"scheme": "sometime", "value": "1"}], UsageError, "not supported"),
            ([{"scheme": "afterok", "value": "nope"}], UsageError, "not a job id")):
        spec["attributes"]["system"]["dependencies"] = deps
        with pytest.raises(exc, match=words):
            jschema.validate(spec)


def test_sched_queue_is_priority_then_submit_order():
    s = sched_with({0: 1})
    s.free, s.up, s.ready = easy.Pool({0: set()}), {0}, True   # full: nothing leaves
    for jobid, prio in ((1, 16), (2, 1), (3, 16), (4, 4294967295), (5, 20), (6, 1)):
        s._enqueue(_Pending(jobid, None, req(), prio))
    assert [p.id for p in s.queue] == [4, 5, 1, 3, 2, 6]
    s.schedule()
    assert len(s.queue) == 6


NOW = 1_800_000_000.0   # a fixed "now"


def test_begin_time_forms():
    assert depend.parse_begin_time("+30s", NOW) == NOW + 30
    assert depend.parse_begin_time("+2h", NOW) == NOW + 7200
    assert depend.parse_begin_time("+0", NOW) == NOW
    import datetime
    here = datetime.datetime.fromtimestamp(NOW)
    later = (here + datetime.timedelta(minutes=5)).replace(microsecond=0)
    t = depend.parse_begin_time(later.strftime("%H:%M:%S"), NOW)
    assert t == later.timestamp()
    earlier = (here - datetime.timedelta(minutes=5)).replace(second=0, microsecond=0)
    t = depend.parse_begin_time(earlier.strftime("%H:%M"), NOW)   # passed today: tomorrow
    assert t == (earlier + datetime.timedelta(days=1)).timestamp()
    day = datetime.datetime(2030, 12, 24, 18, 0)
    assert depend.parse_begin_time("2030-12-24 18:00", NOW) == day.timestamp()
    assert depend.parse_begin_time("2030-12-24T18:00:00", NOW) == day.timestamp()
    assert depend.parse_begin_time("2030-12-24", NOW) == datetime.datetime(2030, 12,
                                                                           24).timestamp()
    assert depend.description({"scheme": "begin-time", "value": 12.5}) == \
        "begin-time=12.500"


def test_begin_time_in_words_as_flux_reads_them():
    """Flux reads a begin-time in words (parsedatetime): tomorrow, in 5 minutes, noon."""
    import datetime
    base = datetime.datetime.fromtimestamp(NOW)
    assert depend.parse_begin_time("in 5 minutes", NOW) == pytest.approx(NOW + 300, abs=1)
    tomorrow = depend.parse_begin_time("tomorrow", NOW)
    assert datetime.datetime.fromtimestamp(tomorrow).date() == \
        (base + datetime.timedelta(days=1)).date()
    assert datetime.datetime.fromtimestamp(depend.parse_begin_time("noon", NOW)).hour == 12


@pytest.mark.parametrize("bad", ["+5x", "+-5s", "25:00", "12:60", "", "+",
                                 "2030-13-01", "some words"])
def test_begin_time_rejects(bad):
    with pytest.raises(UsageError, match="invalid begin-time"):
        depend.parse_begin_time(bad, NOW)


def test_jobspec_begin_time_value_is_a_number():
    spec = _with_system({"dependencies": [{"scheme": "begin-time",
                                                        "value": NOW}]})
    jschema.validate(spec)
    for value, exc in (("soon", ProtocolError), (-1.0, UsageError), (1e13, UsageError)):
        spec["attributes"]["system"]["dependencies"][0]["value"] = value
        with pytest.raises(exc, match="dependencies"):
            jschema.validate(spec)


def _with_system(system: dict) -> dict:
    spec = js.Jobspec.from_command(["true"])
    for key, val in system.items():
        spec.setattr(f"system.{key}", val)
    return spec.jobspec


def test_singleton_is_a_scheme_without_a_job_id():
    assert depend.parse_uri("singleton") == {"scheme": "singleton", "value": ""}
    assert depend.description({"scheme": "singleton", "value": ""}) == "singleton"
    spec = _with_system({"dependencies": [{"scheme": "singleton", "value": ""}]})
    jschema.validate(spec)
