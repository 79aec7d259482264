"""What exec, chdir or setenv could never take is refused at submit, with one error
naming the field: a NUL byte in an argument, the cwd or the environment, and a name
with '=' (they used to be accepted and crash the job shell: "exit code 1", no
exception)."""

import os

import pytest

from fluxlite.errors import UsageError
from fluxlite.job.jobspec import Jobspec
from fluxlite.jobapi import api

pytestmark = pytest.mark.timeout(120)

P = {"PATH": os.environ["PATH"]}


def spec(env=P):
    return Jobspec.from_command(["true"], environment=env, validate=False).jobspec


def with_arg(j):
    j["tasks"][0]["command"] = ["echo", "a\x00b"]
    return j


def with_cwd(j):
    j["attributes"]["system"]["cwd"] = "/tmp\x00x"
    return j


CASES = [
    (lambda: spec(dict(P, B="x\x00y")), "environment: the value of B contains a NUL byte"),
    (lambda: spec(dict(P, **{"B\x00C": "1"})), "environment: name 'B\\x00C' is not allowed"),
    (lambda: spec(dict(P, **{"B=C": "1"})), "environment: name 'B=C' is not allowed"),
    (lambda: with_arg(spec()), "tasks[0]: command[1] contains a NUL byte"),
    (lambda: with_cwd(spec()), "attributes.system: cwd contains a NUL byte"),
]


@pytest.mark.parametrize("make, words", CASES)
def test_refused_at_submit_naming_the_field(inst1, make, words):
    h = inst1.handle()
    with pytest.raises(UsageError) as e:
        api.submit(h, make())
    assert words in e.value.message and "\n" not in e.value.message
    assert inst1.cli("jobs", "-a", "-n", "-o", "{id}").stdout == ""   # no job made


def test_the_python_builder_refuses_them_too():
    with pytest.raises(UsageError, match="name 'B=C' is not allowed"):
        Jobspec.from_command(["true"], environment=dict(P, **{"B=C": "1"}))


def test_a_jobspec_of_three_mib_is_accepted_and_runs_one_over_four_is_refused(inst1):
    """docs/protocol.md: methods carrying a jobspec take 4 MiB; submit took 1 MiB."""
    h = inst1.handle()
    j = spec()
    j["attributes"]["user"] = {"data": "d" * (3 << 20)}
    jobid = api.submit(h, j)
    assert api.wait(h, jobid, timeout=60)["success"]
    j["attributes"]["user"] = {"data": "d" * (5 << 20)}
    with pytest.raises(UsageError) as e:
        api.submit(h, j)
    assert "payload" in e.value.message and str(4 << 20) in e.value.message
