"""`fluxlite uri`, `proxy` and `shutdown` aimed at a nested instance by job id,
through the real CLI: uri --local and its other forms, instances nested twice,
shutting down one instance only, proxy when its instance goes away, targets
that are no instance."""

import pytest
from background import lines_of

pytestmark = pytest.mark.timeout(120)


def nested(inst):
    from fluxlite.testing import jobid_of
    from fluxlite.util import fluid
    return fluid.f58(jobid_of(inst.cli("alloc", "-N1", "--bg", timeout=60)))


def wait_inactive(inst, f58):
    cp = inst.cli("job", "wait", f58, timeout=60)
    assert cp.returncode == 0, cp.stderr
    state = inst.cli("jobs", "-a", "-no", "{id} {state}", check=True).stdout
    assert f"{f58} INACTIVE" in state, state


def test_uri_local_forms(inst4):
    f58 = nested(inst4)
    uri = inst4.cli("uri", f58, check=True).stdout.strip()
    assert uri.startswith("local://")
    for args in (("--local", f58), (f58 + "?local",), ("jobid:" + f58,), ("--local", uri)):
        assert inst4.cli("uri", *args, check=True).stdout.strip() == uri, args
    ipc = "ipc://" + uri[len("local://"):]
    assert inst4.cli("uri", "--local", ipc, check=True).stdout.strip() == uri
    assert inst4.cli("uri", ipc, check=True).stdout.strip() == ipc
    inst4.cli("shutdown", f58, check=True)
    wait_inactive(inst4, f58)


def test_uri_of_a_nested_nested_instance(inst4):
    outer = nested(inst4)
    env = {"FLUXLITE_URI": inst4.cli("uri", outer, check=True).stdout.strip()}
    inner = inst4.cli("alloc", "-N1", "--bg", env=env, timeout=60)
    assert inner.returncode == 0, inner.stderr
    inner_id = inner.stdout.strip()
    uri = inst4.cli("uri", f"{outer}/{inner_id}", check=True).stdout.strip()
    assert inst4.cli("proxy", uri, "fluxlite", "getattr", "instance-level",
                     check=True).stdout.strip() == "2"
    assert inst4.cli("proxy", f"jobid:{outer}/{inner_id}", "fluxlite", "getattr", "jobid",
                     check=True).stdout.strip() == inner_id
    inst4.cli("shutdown", f"{outer}/{inner_id}", check=True)
    inst4.cli("shutdown", outer, check=True)
    wait_inactive(inst4, outer)


def test_shutdown_jobid_ends_that_instance_only(inst4):
    f58 = nested(inst4)
    inst4.cli("shutdown", "--reason", "done with it", f58, check=True)
    wait_inactive(inst4, f58)
    assert inst4.cli("getattr", "size", check=True).stdout.strip() == "4"
    cp = inst4.cli("shutdown", f58)
    assert cp.returncode != 0 and "no longer running" in cp.stderr
    assert len(cp.stderr.splitlines()) == 1


def test_proxy_by_uri_and_by_jobid(inst4):
    f58 = nested(inst4)
    uri = inst4.cli("uri", f58, check=True).stdout.strip()
    assert inst4.cli("proxy", uri, "fluxlite", "getattr", "jobid",
                     check=True).stdout.strip() == f58
    assert inst4.cli("proxy", inst4.uri, "sh", "-c", "exit 5").returncode == 5
    shell = inst4.cli("proxy", f58, input="fluxlite getattr jobid\n",
                      env={"SHELL": "/bin/sh"}, check=True)
    assert shell.stdout.strip() == f58
    inst4.cli("shutdown", f58, check=True)
    wait_inactive(inst4, f58)


def test_proxy_says_when_the_instance_goes_away(inst4):
    f58 = nested(inst4)
    with inst4.cli_background("proxy", f58, "sh", "-c", "echo ready; exec sleep 300") as p:
        assert lines_of(p, 1) == ["ready"]
        inst4.cli("shutdown", f58, check=True)
        rc = p.wait(60)
        err = p.stderr.read()
    assert rc == 1, err
    assert err.startswith("fluxlite proxy: lost connection to local://"), err
    assert len(err.splitlines()) == 1
    wait_inactive(inst4, f58)


def test_proxy_command_that_ends_its_instance_keeps_its_own_status(inst4):
    """A COMMAND that shuts its instance down and then ends by itself (within
    proxy's grace) is not told the connection was lost: proxy exits with its status."""
    f58 = nested(inst4)
    cp = inst4.cli("proxy", f58, "sh", "-c", "fluxlite shutdown; sleep 0.3; echo done; exit 3",
                   timeout=60)
    assert cp.returncode == 3, cp.stderr
    assert cp.stdout.strip().splitlines()[-1] == "done"
    assert "lost connection" not in cp.stderr, cp.stderr
    wait_inactive(inst4, f58)


@pytest.mark.parametrize("args,said", [
    (("uri", "foo:bar"), "unsupported target 'foo:bar'"),
    (("uri", "ƒ1"), "unknown job"),
    (("uri", "?local"), "empty target"),
    (("proxy", "ƒ1", "true"), "unknown job"),
    (("proxy", "local:///nonexistent/local-0", "true"), "no instance"),
    (("shutdown", "jobid:nope"), "error parsing jobid"),
])
def test_target_bad_input(inst1, args, said):
    cp = inst1.cli(*args)
    assert cp.returncode != 0 and cp.stdout == ""
    assert len(cp.stderr.splitlines()) == 1 and said in cp.stderr, cp.stderr


def test_uri_of_a_job_that_is_not_an_instance(inst1):
    from fluxlite.testing import jobid_of
    from fluxlite.util import fluid
    f58 = fluid.f58(jobid_of(inst1.cli("submit", "sleep", "300", check=True)))
    for args in (("uri", f58), ("proxy", f58, "true"), ("shutdown", f58)):
        cp = inst1.cli(*args)
        assert cp.returncode != 0 and "is not an instance" in cp.stderr, cp.stderr
    inst1.cli("cancel", f58, check=True)
