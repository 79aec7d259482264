"""The job API for asyncio programs, on an AsyncHandle (fluxlite.client.aio).

    from fluxlite.client.aio import AsyncHandle
    from fluxlite.job import Jobspec
    from fluxlite.jobapi import aio
    h = await AsyncHandle(uri).connect()
    jobid = await aio.submit(h, Jobspec.from_command(["hostname"]))
    async for e in aio.event_watch(h, jobid):
        print(e["name"])
    print((await aio.wait(h, jobid))["result"])

The same operations as the blocking API (api.py), sending the same requests
(built there), with the same answers and errors; event_watch uses the one
eventlog Follower, driven by the event loop.
"""

from __future__ import annotations

import asyncio
import collections

from ..errors import RPCTimeout
from ..job import states
from . import api


async def submit(h, jobspec, *, urgency: int = 16, waitable: bool = False) -> int:
    """Submit a Jobspec (or a jobspec dict); its job id.  A jobspec the instance
    refuses raises UsageError.  Every fluxlite job may be waited for by id, so
    `waitable` (Flux's flag) changes nothing: it is accepted for the same calls."""
    return (await submit_full(h, jobspec, urgency=urgency))["id"]


async def submit_full(h, jobspec, *, urgency: int = 16) -> dict:
    """As api.submit_full: the id and, if the job was refused at once, its exception."""
    return await h.call(*api.submit_request(jobspec, urgency))


async def wait(h, jobid: int, timeout: float | None = None) -> dict:
    """Until the job is inactive: {id, success, errstr, result, returncode}, as
    api.wait.  RPCTimeout if it is not within `timeout` seconds."""
    try:
        return await h.call(*api.wait_request(jobid), timeout=timeout)
    except TimeoutError:
        raise RPCTimeout(f"job-manager.wait: no response within {timeout:g}s") from None


async def cancel(h, jobid: int, note: str = "") -> None:
    await h.call(*api.cancel_request(jobid, note))


async def info(h, jobid: int) -> dict:
    return await h.call(*api.info_request(jobid))


async def result(h, jobid: int) -> dict:
    """The job's record (as api.info: state INACTIVE, result, returncode, waitstatus...)
    once it is inactive.  Unlike wait() it does not count as waiting for the job."""
    async for _ in event_watch(h, jobid):
        pass
    return await info(h, jobid)


async def event_watch(h, jobid: int, path: str = "eventlog"):
    """The entries of a job eventlog (eventlog, exec, output, input) as they are
    appended, ending where the log can grow no more, as api.event_watch with
    `follow`: an unknown id, or a log the job ended without, raises NotFound."""
    path = "eventlog" if path == "main" else path
    await info(h, jobid)  # an unknown id is an error now, not a wait for a log never written
    queue: collections.deque = collections.deque()
    wake = asyncio.Event()

    def on_entry(e: dict) -> None:
        queue.append(e)
        wake.set()

    f = api.Follower(h, jobid, path, on_entry=on_entry, on_done=wake.set).start()
    try:
        while True:
            while queue:
                yield queue.popleft()
            if f.done:
                break
            wake.clear()
            await wake.wait()
        if f.error is not None:
            raise f.error
        if f.missing:
            raise api.no_eventlog_error(jobid, path, states.INACTIVE, f.main_entries)
    finally:
        f.close()
