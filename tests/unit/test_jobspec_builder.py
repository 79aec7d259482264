"""fluxlite.job.Jobspec: the one jobspec builder, with Flux's JobspecV1 arguments,
setters and errors."""

import datetime
import json
import pathlib

import pytest

from fluxlite.errors import UsageError
from fluxlite.job import Jobspec
from fluxlite.job import jobspec as js
from fluxlite.job import schema as jschema

pytestmark = pytest.mark.timeout(30)


def test_from_command_defaults_are_one_task_one_core():
    spec = Jobspec.from_command(["hostname"])
    assert spec.resources == [{"type": "slot", "count": 1, "label": "task",
                               "with": [{"type": "core", "count": 1}]}]
    assert spec.tasks == [{"command": ["hostname"], "slot": "task",
                           "count": {"per_slot": 1}}]
    assert spec.duration == 0.0 and spec.version == 1
    with pytest.raises(KeyError):   # as Flux: a job has a name only when given one
        spec.getattr("system.job.name")
    assert js.command_name(spec.jobspec) == "hostname"   # what `jobs` shows instead
    assert jschema.request(spec.jobspec).ntasks == 1


def test_from_command_nodes_even_and_uneven():
    even = Jobspec.from_command(["a"], num_tasks=4, num_nodes=2, cores_per_task=2)
    assert even.resources[0]["type"] == "node" and even.resources[0]["count"] == 2
    assert even.resources[0]["with"][0]["count"] == 2
    assert even.tasks[0]["count"] == {"per_slot": 1}
    uneven = Jobspec.from_command(["a"], num_tasks=3, num_nodes=2)
    assert uneven.tasks[0]["count"] == {"total": 3}
    assert jschema.request(uneven.jobspec).ntasks == 3


@pytest.mark.parametrize("kwargs,exc,words", [
    (dict(num_tasks=0), ValueError, "task count"),
    (dict(num_tasks="2"), ValueError, "task count"),
    (dict(cores_per_task=0), ValueError, "cores per task"),
    (dict(num_nodes=0), ValueError, "node count"),
    (dict(num_tasks=1, num_nodes=2), ValueError, "must not be greater than task count"),
    (dict(duration=-1), ValueError, "must not be negative"),
    (dict(duration=float("nan")), ValueError, "finite"),
    (dict(duration="forever"), ValueError, "Flux Standard Duration"),
    (dict(duration=[1]), TypeError, "duration must be"),
    (dict(cwd=5), ValueError, "cwd must be a string"),
    (dict(environment=["A=1"]), ValueError, "environment must be a mapping"),
    (dict(output=3), TypeError, "The path must be a string"),
])
def test_from_command_refuses_nonsense_as_flux_does(kwargs, exc, words):
    with pytest.raises(exc, match=words) as info:
        Jobspec.from_command(["true"], **kwargs)
    assert isinstance(info.value, UsageError)  # the CLI prints it as one line


def test_command_must_be_a_nonempty_list():
    with pytest.raises(ValueError, match="needs a command"):
        Jobspec.from_command([])
    with pytest.raises(TypeError, match="list of words"):
        Jobspec.from_command("hostname")


def test_unsupported_arguments_say_so():
    assert Jobspec.from_command(["true"], rlimits={"nofile": 10}).getattr(
        "system.shell.options.rlimit") == {"nofile": 10}
    assert Jobspec.from_command(["true"], gpus_per_task=0).resources[0]["count"] == 1


def test_gpus_per_task_and_per_node():
    """-g puts a gpu entry beside the core in each slot (RFC 14); --gpus-per-node with
    -N shares a node's GPUs among its slots; both reduce to the request's GPUs a slot."""
    from fluxlite.job import schema as jschema
    spec = Jobspec.from_command(["true"], num_tasks=2, gpus_per_task=1)
    assert spec.resources[0]["with"] == [{"type": "core", "count": 1},
                                         {"type": "gpu", "count": 1}]
    assert jschema.validate(spec.jobspec).gpus_per_slot == 1
    spec = Jobspec.from_command(["true"], num_nodes=2, num_tasks=4, gpus_per_node=2)
    assert spec.resources[0]["with"][0]["with"][1] == {"type": "gpu", "count": 1}
    assert jschema.validate(spec.jobspec).gpus_per_slot == 1
    with pytest.raises(ValueError, match="needs -N"):
        Jobspec.from_command(["true"], gpus_per_node=2)
    with pytest.raises(ValueError, match="gpus per task"):
        Jobspec.from_command(["true"], gpus_per_task=-1)


def test_setters_and_properties(tmp_path):
    spec = Jobspec.from_command(["true"], environment={"A": "1"}, cwd="/tmp", name="nm")
    assert spec.environment == {"A": "1"} and spec.cwd == "/tmp"
    spec.cwd = tmp_path
    assert spec.cwd == str(tmp_path)
    spec.environment = {"B": "2"}
    assert spec.environment == {"B": "2"}
    spec.duration = "1.5m"
    assert spec.duration == 90.0
    spec.duration = datetime.timedelta(hours=1)
    assert spec.duration == 3600.0
    spec.duration = 7
    assert spec.duration == 7.0
    spec.stdout = pathlib.Path("out.{{id}}")
    spec.stderr = "err"
    spec.stdin = tmp_path / "in"
    opts = spec.attributes["system"]["shell"]["options"]
    assert opts == {"output.stdout.path": "out.{{id}}", "output.stderr.path": "err",
                    "input.path": str(tmp_path / "in")}
    assert (spec.stdout, spec.stderr, spec.stdin) == ("out.{{id}}", "err",
                                                      str(tmp_path / "in"))
    spec.setattr("user.tag", "x")
    spec.setattr("attributes.system.queue", "q")
    spec.setattr_shell_option("exit-timeout", "none")
    assert spec.getattr("user.tag") == "x" and spec.getattr("system.queue") == "q"
    assert opts["exit-timeout"] == "none"
    with pytest.raises(KeyError):
        spec.getattr("system.nope")
    assert json.loads(spec.dumps()) == spec.jobspec
    spec.validate()


def test_validate_catches_what_setters_let_through():
    spec = Jobspec.from_command(["true"])
    spec.setattr_shell_option("cpu-affinity", "sideways")
    with pytest.raises(UsageError, match="invalid shell option cpu-affinity"):
        spec.validate()
    # a name no built-in knows is a plugin's: accepted, as Flux's shell options are
    spec = Jobspec.from_command(["true"])
    spec.setattr_shell_option("no-such-option", 1)
    spec.validate()


def test_from_nest_command_is_one_broker_per_node():
    spec = Jobspec.from_nest_command(["sh", "-c", "true"], num_slots=2, num_nodes=2,
                                     broker_opts=["-Sa=b"])
    cmd = spec.tasks[0]["command"]
    assert cmd[1:] == ["broker", "-Sa=b", "--", "sh", "-c", "true"]
    assert spec.tasks[0]["count"] == {"per_node": 1}
    opts = spec.attributes["system"]["shell"]["options"]
    assert opts["instance"] == 1 and opts["exit-timeout"] == "none"
    assert jschema.request(spec.jobspec).nnodes == 2


def test_from_batch_command_stores_the_script():
    script = "#!/bin/sh\necho hi\n"
    spec = Jobspec.from_batch_command(script, "myjob", args=["x"], num_slots=2,
                                      cores_per_slot=2)
    assert spec.getattr("system.batch.script") == script
    assert spec.getattr("system.job.name") == "myjob"
    assert spec.tasks[0]["command"][-2:] == ["{{script}}", "x"]
    assert jschema.request(spec.jobspec).nslots == 2
    with pytest.raises(ValueError, match="myjob does not appear to start with '#!'"):
        Jobspec.from_batch_command("echo hi\n", "myjob")
    with pytest.raises(NotImplementedError, match="conf"):
        Jobspec.from_batch_command(script, "myjob", conf={"tbon": {"fanout": 2}})
    # an empty configuration asks for nothing (Flux's workflow tools pass conf={})
    assert Jobspec.from_batch_command(script, "myjob", conf={}).getattr("system.job.name") \
        == "myjob"


def test_constructor_takes_a_jobspec_apart():
    d = Jobspec.from_command(["true"]).jobspec
    again = Jobspec(**d)
    assert again.jobspec == d
    with pytest.raises(ValueError, match="version must be 1"):
        Jobspec(d["resources"], d["tasks"], d["attributes"], version=2)


def test_the_cli_builds_with_it():
    from fluxlite.cli.options import jobspec_from
    spec = jobspec_from(["true"], {"ntasks": 2, "setattr": {"user.a": 1, "queue": "q"},
                                   "setopt": {"exit-timeout": "none"}, "output": "o"})
    assert spec["attributes"]["user"] == {"a": 1}
    assert spec["attributes"]["system"]["queue"] == "q"
    assert spec["attributes"]["system"]["shell"]["options"] == {
        "exit-timeout": "none", "output.stdout.path": "o"}
    assert jschema.request(spec).ntasks == 2
