"""A submit is answered before any job shell is asked to start.

Rank 0's router with its real kvs, sched and job-manager services, wired as a
broker wires them (the context's rpc, send and respond are the router's), and
the event loop running: a client's job-manager.submit goes in, and the order in
which its answer leaves for the client and job-exec.start reaches job-exec is
recorded.  Job-exec is a recorder here (the shells are what it would start)."""

import asyncio

import pytest

from fluxlite.job import jobspec as js
from fluxlite.protocol import message as m
from fluxlite.protocol.message import ROLE_OWNER, Message
from fluxlite.router.router import Router
from fluxlite.service import kvs_direct
from fluxlite.service.base import ServiceContext
from fluxlite.service.job_manager import JobManagerService
from fluxlite.service.kvs import KVSService
from fluxlite.service.sched import SchedService
from fluxlite.util import tree

pytestmark = pytest.mark.timeout(30)

OWNER = 1000
CLIENT = b"\x01client"


class Links:
    """Rank 0 of a size-1 instance: only clients to send to."""

    def __init__(self, order):
        self.order = order

    def parent_connected(self):
        return False

    def send_parent(self, frames, instance=False):
        raise AssertionError("rank 0 has no parent")

    def child_state(self, rank):
        return "lost"

    def send_child(self, rank, frames, instance=False):
        return False

    def send_children(self, frames):
        pass

    def send_client(self, ident, frames, instance=False):
        msg = m.decode(frames)
        self.order.append(("client", msg.topic, msg.errnum))
        return True


class JobExec:
    """Where job-exec.start arrives: noted, and kept (a start is a stream)."""

    def __init__(self, order, started):
        self.order, self.started = order, started

    def dispatch(self, msg):
        self.order.append(("job-exec", msg.topic, 0))
        self.started.set()
        return True

    def drop_streams(self, match):
        pass


def test_submit_is_answered_before_job_exec_is_asked_to_start():
    order = []

    async def run():
        started = asyncio.Event()
        r = Router(rank=0, topology=tree.Topology.kary(1, 2), userid=OWNER,
                   links=Links(order))
        ctx = ServiceContext(rank=0, size=1, owner=OWNER, hostname="h0", hosts=("h0",),
                             attrs={}, rpc=r.rpc, send=r.send_noresponse, respond=r.respond,
                             publish=r.publish, state=lambda: "run",
                             at_least=lambda s: False)
        kvs, sched = KVSService(ctx), SchedService(ctx)
        jm = JobManagerService(ctx, kvs=kvs_direct.view(kvs))
        r.services.update({"kvs": kvs, "sched": sched, "job-manager": jm,
                           "job-exec": JobExec(order, started)})
        r.open()
        # the resources resource.acquire would give: one rank, two cores
        sched._resource_update(Message.request("resource.acquire").response(
            {"resources": {"0": [0, 1]}, "up": "0"}))
        spec = js.Jobspec.from_command(["true"]).jobspec
        submit = Message.request("job-manager.submit", {"jobspec": spec}, matchtag=1,
                                 userid=OWNER, role=ROLE_OWNER)
        r.deliver(submit, CLIENT)
        assert order == []                       # nothing inside the call
        await asyncio.wait_for(started.wait(), 10)
        for svc in (jm, sched, kvs):
            svc.stop()

    asyncio.run(run())
    assert order == [("client", "job-manager.submit", 0),
                     ("job-exec", "job-exec.start", 0)]
