"""fluxlite.jobapi.aio against a real instance: concurrent submits, an eventlog
followed with `async for`, cancel of a running job, refused jobspecs."""

import asyncio
import contextlib

import pytest

from fluxlite.client.aio import AsyncHandle
from fluxlite.errors import InvalidType, NotFound, RPCTimeout, UsageError
from fluxlite.job import Jobspec
from fluxlite.jobapi import aio, api

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
async def h(inst):
    h = await AsyncHandle(inst.uri).connect()
    yield h
    h.close()


async def test_twenty_concurrent_submits_and_waits(h):
    specs = [cmd("sh", "-c", f"exit {i % 3}") for i in range(20)]
    ids = await asyncio.wait_for(asyncio.gather(*(aio.submit(h, s) for s in specs)), WAIT)
    assert len(set(ids)) == 20 and all(isinstance(i, int) and i > 0 for i in ids)
    results = await asyncio.wait_for(asyncio.gather(*(aio.wait(h, i) for i in ids)), WAIT)
    assert [r["id"] for r in results] == ids
    assert [r["returncode"] for r in results] == [i % 3 for i in range(20)]
    assert [r["result"] for r in results] == ["COMPLETED" if i % 3 == 0 else "FAILED"
                                              for i in range(20)]
    assert [r["success"] for r in results] == [i % 3 == 0 for i in range(20)]


async def test_async_for_sees_submit_to_clean_in_order(h, inst):
    jobid = await aio.submit(h, cmd("true").jobspec)  # a dict works as a Jobspec does

    async def names():
        return [e["name"] async for e in aio.event_watch(h, jobid)]
    assert await asyncio.wait_for(names(), WAIT) == MAIN
    # the same entries as the blocking API reads, and the same wait result
    assert [e["name"] for e in api.event_watch(inst.handle(), jobid, follow=False)] == MAIN
    assert (await aio.wait(h, jobid, timeout=WAIT)) == api.wait(inst.handle(), jobid)


async def test_exec_log_watch_and_missing_log(h):
    jobid = await aio.submit(h, cmd("true"))
    ex = await asyncio.wait_for(
        _collect(aio.event_watch(h, jobid, "exec")), WAIT)
    assert ex[0] == "init" and ex[-1] == "done"
    with pytest.raises(NotFound, match="unknown job id"):
        await asyncio.wait_for(_collect(aio.event_watch(h, 12345678)), WAIT)
    held = await aio.submit(h, cmd("true"), urgency=0)  # held: never starts
    await aio.cancel(h, held)
    with pytest.raises(NotFound, match="never started, so it has no exec eventlog"):
        await asyncio.wait_for(_collect(aio.event_watch(h, held, "exec")), WAIT)


async def _collect(agen):
    return [e["name"] async for e in agen]


async def test_cancel_a_running_job(h):
    jobid = await aio.submit(h, cmd("sleep", "300"))

    async def started():
        async with contextlib.aclosing(aio.event_watch(h, jobid)) as events:
            async for e in events:
                if e["name"] == "start":
                    return
    await asyncio.wait_for(started(), WAIT)
    await aio.cancel(h, jobid)
    r = await aio.wait(h, jobid, timeout=WAIT)
    assert r["result"] == "CANCELED" and not r["success"]
    info = await asyncio.wait_for(aio.result(h, jobid), WAIT)
    assert info["state"] == "INACTIVE" and info["result"] == "CANCELED"


async def test_result_of_a_finished_job(h):
    jobid = await aio.submit(h, cmd("sh", "-c", "exit 3"), urgency=10, waitable=True)
    info = await asyncio.wait_for(aio.result(h, jobid), WAIT)
    assert info["id"] == jobid and info["result"] == "FAILED" and info["returncode"] == 3
    assert info["urgency"] == 10


async def test_wait_timeout_is_rpc_timeout(h):
    jobid = await aio.submit(h, cmd("sleep", "300"))
    with pytest.raises(RPCTimeout, match="no response within 0.2s"):
        await aio.wait(h, jobid, timeout=0.2)
    await aio.cancel(h, jobid)
    assert (await aio.wait(h, jobid, timeout=WAIT))["result"] == "CANCELED"


async def test_bad_jobspec_raises_usage_error(h):
    bad = cmd("true")
    bad.setattr_shell_option("exit-timeout", "bogus")
    with pytest.raises(UsageError, match="invalid shell option exit-timeout"):
        await aio.submit(h, bad)
    bad = cmd("true").jobspec
    bad["version"] = 7
    with pytest.raises(UsageError):
        await aio.submit(h, bad)
    with pytest.raises(InvalidType, match="Jobspec or a jobspec dict"):
        await aio.submit(h, ["true"])
    # the handle is still good after the refusal
    jobid = await aio.submit(h, cmd("true"))
    assert (await aio.wait(h, jobid, timeout=WAIT))["success"]
