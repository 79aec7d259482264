"""A service's traffic as Flux's module counters and trace see it (service/traffic.py),
and the broker's module table (broker/modules.py) deciding what may stop and come
back, driven with plain objects instead of a broker."""

from __future__ import annotations

import asyncio
import errno

import pytest

from fluxlite.broker.modules import ModuleTable
from fluxlite.errors import AlreadyExists, FluxliteError, NotFound
from fluxlite.protocol import message as m
from fluxlite.protocol.message import Message
from fluxlite.service.traffic import Tracer, Traffic

pytestmark = pytest.mark.timeout(30)


def test_counters_by_type_and_direction_and_clear():
    t = Traffic("sched")
    req = Message.request("sched.alloc", {"id": 1})
    t.note("rx", req)
    t.note("tx", req.response({"alloc": {}}))
    t.note_request("resource.acquire", None, None)
    stats = t.stats()
    assert stats["#request (rx)"] == 1 and stats["#response (tx)"] == 1
    assert stats["#request (tx)"] == 1 and stats["#event (rx)"] == 0
    assert len(stats) == 8
    t.clear()
    assert set(t.stats().values()) == {0}


def test_debug_flag_ops():
    t = Traffic("kvs")
    assert t.debug("setbit", 4) == 4 and t.debug("setbit", 1) == 5
    assert t.debug("clrbit", 4) == 1 and t.debug("set", 0x30) == 0x30
    assert t.debug("clr", 0) == 0
    with pytest.raises(ValueError):
        t.debug("toggle", 1)


def test_tracers_see_what_they_asked_for():
    t = Traffic("sched")
    every, responses, alloc_full = [], [], []
    t.tracers += [Tracer(m.REQUEST | m.RESPONSE, "*", False, every.append),
                  Tracer(m.RESPONSE, "*", False, responses.append),
                  Tracer(m.REQUEST, "sched.al*", True, alloc_full.append)]
    req = Message.request("sched.alloc", {"id": 7})
    t.note("rx", req)
    t.note("tx", req.response(None, errno.ENOSYS, "gone"))
    t.note("rx", Message.request("sched.free", {"id": 7}))
    assert [(r["prefix"], r["topic"]) for r in every] == [
        ("rx", "sched.alloc"), ("tx", "sched.alloc"), ("rx", "sched.free")]
    assert responses[0]["errnum"] == errno.ENOSYS and responses[0]["errstr"] == "gone"
    assert [r["payload"] for r in alloc_full] == [{"id": 7}]
    assert "payload" not in every[0] and every[0]["payload_size"] > 0


class _Svc:
    def __init__(self, name, busy=None, aliases=()):
        self.name, self.busy, self.aliases = name, busy, aliases
        self.traffic = Traffic(name)
        self.unloaded = self.stopped = self.started = False

    async def unload(self):
        pass

    def stop(self):
        self.stopped = True

    async def start(self):
        self.started = True


class _Router:
    rank = 0

    def __init__(self):
        self.services = {}


def test_module_table_remove_load_and_refusals():
    router = _Router()
    table = ModuleTable(router)
    sched, kvs = _Svc("sched", aliases=("sched-simple",)), _Svc("kvs", busy="it holds data")
    for svc in (sched, kvs):
        table.loaded.append(svc)
        table.register(svc)
    table.factories["sched"] = lambda args: (_Svc("sched", aliases=("sched-simple",)), args)

    async def go():
        with pytest.raises(FluxliteError) as busy:
            await table.remove("kvs")
        assert busy.value.errnum == errno.EBUSY and router.services["kvs"] is kvs
        await table.remove("sched-simple")            # Flux's name for it
        assert sched.unloaded and sched.stopped and "sched" not in router.services
        assert "sched-simple" not in router.services
        with pytest.raises(NotFound):
            await table.remove("sched")
        with pytest.raises(NotFound):
            await table.load("nosuch", [])
        with pytest.raises(NotFound):
            await table.load("/lib/flux/modules/sched-simple.so", [])
        assert await table.load("sched", ["mode=limited=2"]) == ["mode=limited=2"]
        again = table.find("sched")
        assert again is not sched and again.started and router.services["sched"] is again
        with pytest.raises(AlreadyExists):
            await table.load("sched-simple", [])

    asyncio.run(go())
