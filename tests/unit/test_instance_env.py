"""The environment an instance hands its processes is a value passed down, never
this process's os.environ changed in place."""

import asyncio
import os

import pytest

from fluxlite.broker.nested import LAUNCHER_ENV, instance_env
from fluxlite.broker.spawner import start_spawner

pytestmark = pytest.mark.timeout(30)


def test_instance_env_drops_the_launchers_variables_and_names_the_instance():
    given = {"PATH": "/bin", "PMI_FD": "5", "PMI_RANK": "0", "PMI_SIZE": "2",
             "FLUXLITE_RUNDIR_BASE": "/tmp/x", "FLUXLITE_URI": "local:///parent/local"}
    before = dict(given)
    env = instance_env(given, "local:///child/local")
    assert env == {"PATH": "/bin", "FLUXLITE_URI": "local:///child/local"}
    assert not set(env) & set(LAUNCHER_ENV)
    assert given == before   # the mapping it was given is not touched


async def test_spawner_hands_its_children_the_environment_it_was_given():
    before = dict(os.environ)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "FLUXLITE_TEST_MARK": "given"}
    sp = start_spawner("fluxlite-spawner test", env=env)
    try:
        sp.attach()
        # the request names no environment: the child gets the spawner's
        plain = sp.spawn("exec", argv=["sh", "-c", 'test "$FLUXLITE_TEST_MARK" = given'])
        # a request's own environment wins
        own = sp.spawn("exec", argv=["sh", "-c", 'test -z "$FLUXLITE_TEST_MARK"'],
                       env={"PATH": env["PATH"]})
        statuses = await asyncio.wait_for(asyncio.gather(plain.exited, own.exited), 20)
        assert statuses == [0, 0]
    finally:
        sp.close()
    assert dict(os.environ) == before
    with pytest.raises(ProcessLookupError):
        os.kill(sp.pid, 0)   # reaped: nothing left behind
