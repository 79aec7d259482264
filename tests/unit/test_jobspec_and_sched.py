"""Pure logic: the -t parser (MINUTES or FSD) and the scheduler's unsatisfiable
sentences, which must name what was asked and what limits it."""

import pytest

from fluxlite.errors import UsageError
from fluxlite.job import easy, shell_options
from fluxlite.job import jobspec as js
from fluxlite.job import schema as jschema
from fluxlite.service.base import ServiceContext
from fluxlite.service.sched import SchedService
from fluxlite.util import fsd


@pytest.mark.parametrize("text,secs", [
    ("5", 300), ("0.5", 30), (" 2 ", 120), ("1e1", 600), ("0", 0), ("none", 0), ("NONE", 0),
    ("30s", 30), ("10m", 600), ("1.5h", 5400), ("1d", 86400), ("500ms", 0.5),
])
def test_time_limit_bare_number_is_minutes(text, secs):
    assert js.parse_duration(text) == pytest.approx(secs)


@pytest.mark.parametrize("bad", ["soon", "-1", "5x", "", "1_0"])
def test_time_limit_rejects(bad):
    with pytest.raises(UsageError, match="is not MINUTES or a Flux Standard Duration"):
        js.parse_duration(bad)


def test_other_durations_keep_bare_seconds():
    """Only -t reads a bare number as minutes: FSDs elsewhere (exit-timeout) are seconds."""
    assert fsd.parse("5") == 5.0
    assert fsd.parse_timeout("5") == 5.0
    shell_options.validate({"exit-timeout": "5"})


def sched_with(cores: dict[int, int], removed=()) -> SchedService:
    ctx = ServiceContext(rank=0, size=len(cores), owner=0, hostname="h",
                         hosts=("h",) * len(cores), attrs={},
                         rpc=None, send=None, respond=lambda msg: None, publish=None,
                         state=lambda: "run", at_least=lambda s: False)
    s = SchedService(ctx)
    s.total = easy.Pool({r: set(range(n)) for r, n in cores.items()})
    s.removed = set(removed)
    return s


def req(nnodes=None, ntasks=None, cores=1):
    spec = js.Jobspec.from_command(["true"], num_nodes=nnodes, num_tasks=ntasks,
                                   cores_per_task=cores)
    return jschema.request(spec.jobspec)


@pytest.mark.parametrize("cores,removed,request_,words", [
    ({0: 2, 1: 2, 2: 2, 3: 2}, (), req(nnodes=4, ntasks=9),
     "need 4 exclusive node(s) with 3 core(s) each, but the 4 eligible node(s) have at most "
     "2 core(s) each"),
    ({0: 2, 1: 2}, (), req(nnodes=1, cores=3),
     "need 1 exclusive node(s) with 3 core(s) each, but the 2 eligible node(s) have at most "
     "2 core(s) each"),
    ({0: 2, 1: 2, 2: 2, 3: 2}, (3,), req(nnodes=4),
     "need 4 exclusive node(s) with 1 core(s) each, only 3 eligible"),
    ({0: 4, 1: 2, 2: 2}, (), req(nnodes=2, cores=3),
     "need 2 exclusive node(s) with 3 core(s) each, only 1 of the 3 eligible node(s) have "
     "3 or more cores"),
    ({0: 2, 1: 2}, (), req(ntasks=1, cores=3),
     "need 1 slot(s) of 3 core(s), but the 2 eligible node(s) have at most 2 core(s) each "
     "(a slot must fit on one node)"),
    ({0: 2, 1: 2}, (), req(ntasks=5),
     "need 5 slot(s) of 1 core(s), only 4 such slot(s) available (total cores: 4)"),
    ({0: 2, 1: 2}, (0, 1), req(nnodes=1),
     "need 1 exclusive node(s) with 1 core(s) each, only 0 eligible"),
])
def test_unsatisfiable_names_the_limit(cores, removed, request_, words):
    assert sched_with(cores, removed).unsatisfiable(request_) == \
        f"unsatisfiable request: {words}"


@pytest.mark.parametrize("request_", [req(nnodes=2, ntasks=4), req(ntasks=4),
                                      req(nnodes=1, cores=2)])
def test_what_fits_is_not_unsatisfiable(request_):
    assert sched_with({0: 2, 1: 2}).unsatisfiable(request_) is None


def test_output_mode_option():
    shell_options.validate({"output.mode": "truncate", "output.stdout.path": "x"})
    shell_options.validate({"output.mode": "append"})
    with pytest.raises(UsageError, match="output.mode must be truncate or append"):
        shell_options.validate({"output.mode": "overwrite"})


def test_equal_requests_are_one_shared_object():
    a = js.Jobspec.from_command(["true"]).jobspec
    b = js.Jobspec.from_command(["hostname"], num_tasks=1).jobspec
    c = js.Jobspec.from_command(["true"], num_tasks=2).jobspec
    assert jschema.validate(a) is jschema.validate(b)
    assert jschema.request(a) is jschema.validate(a)
    assert jschema.validate(c) is not jschema.validate(a)
    assert jschema.validate(c) == jschema.Request(None, None, 2, 1, False, per_slot=1)


@pytest.mark.parametrize("kw", [dict(num_tasks=3, cores_per_task=2),
                                dict(num_tasks=4, num_nodes=2),
                                dict(num_tasks=None, num_nodes=2, per_node=3)])
def test_request_is_computed_once_and_carried_as_it_was(kw):
    """The job-manager computes a job's request at submit and carries it to sched and
    job-exec (Request.wire()); what they read back is the same request, shared."""
    import msgspec
    req = jschema.validate(js.Jobspec.from_command(["true"], **kw).jobspec)
    back = msgspec.convert(req.wire(), jschema.Request).shared()
    assert back == req and back is req
    for bad in ({**req.wire(), "nslots": 0}, {**req.wire(), "cores_per_slot": "2"},
                {k: v for k, v in req.wire().items() if k != "nslots"}):
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert(bad, jschema.Request)


def test_a_task_may_name_another_slot_label_as_flux_accepts():
    """flux-core's t/jobspec/valid/basic_v1.yaml: the task's slot is 'foo' while the
    one slot is labelled 'task'; Flux accepts it, so fluxlite does."""
    spec = {"version": 1,
            "resources": [{"type": "slot", "count": 1, "label": "task",
                           "with": [{"type": "core", "count": 1}]}],
            "tasks": [{"command": ["app"], "slot": "foo", "count": {"per_slot": 1}}],
            "attributes": {"system": {"duration": 0}}}
    req = jschema.validate(spec)
    assert (req.nslots, req.per_slot) == (1, 1)
