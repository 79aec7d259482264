"""Services get narrow interfaces, not the broker's parts: the overlay service reads
an OverlayView, the broker service changes a ClientRegistry, the module service
uses the broker's module table as Modules, and the job-manager, job-exec and resource reach the KVS
directly only through KVSDirect (kvs_direct.py).  Each uses nothing of what it is
given beyond its Protocol, and works with any object that has it; the broker's
wiring hands no service another service's object."""

from __future__ import annotations

import ast
import importlib
import inspect
import pathlib
import pkgutil

import pytest

from fluxlite.broker import broker
from fluxlite.protocol.message import Message
from fluxlite.service import broker_svc, jm_restart, job_exec, kvs_direct, overlay, resource
from fluxlite.service import job_manager as jm_pkg
from fluxlite.service import module as module_svc
from fluxlite.service.base import ServiceContext
from fluxlite.service.kvs import KVSService
from fluxlite.util import tree

pytestmark = pytest.mark.timeout(30)


def _members(proto) -> set[str]:
    names = set(getattr(proto, "__annotations__", {}))
    names |= {n for n, v in vars(proto).items()
              if inspect.isfunction(v) and not n.startswith("__")}
    return names


def _used(module, attr: str, aliases=()) -> set[str]:
    """The attributes the module reads of `self.<attr>` (or of a local alias of it)."""
    tree_ = ast.parse(pathlib.Path(module.__file__).read_text())
    out = set()
    for node in ast.walk(tree_):
        if not isinstance(node, ast.Attribute):
            continue
        v = node.value
        if (isinstance(v, ast.Attribute) and v.attr == attr and isinstance(v.value, ast.Name)
                and v.value.id == "self") or (isinstance(v, ast.Name) and v.id in aliases):
            out.add(node.attr)
    return out


@pytest.mark.parametrize("module, attr, proto, aliases", [
    (overlay, "overlay", overlay.OverlayView, ("ov",)),
    (broker_svc, "clients", broker_svc.ClientRegistry, ()),
    (module_svc, "modules", module_svc.Modules, ()),
    (job_exec, "kvs", kvs_direct.KVSDirect, ()),
    (resource, "kvs", kvs_direct.KVSDirect, ()),
    (jm_restart, "kvs", kvs_direct.KVSDirect, ("kvs",)),
])
def test_a_service_uses_only_its_protocol(module, attr, proto, aliases):
    used = _used(module, attr, aliases)
    assert used, "the scan found nothing: it no longer matches the code"
    assert used <= _members(proto), f"beyond {proto.__name__}: {sorted(used - _members(proto))}"


def test_the_job_manager_uses_only_kvs_direct():
    modules = [importlib.import_module(f"{jm_pkg.__name__}.{name}")
               for name in pkgutil.iter_modules(jm_pkg.__path__) for name in [name.name]]
    used = set().union(*(_used(mod, "kvs") for mod in modules))
    assert {"commit", "lookup", "durable"} <= used
    assert used <= _members(kvs_direct.KVSDirect)


def test_kvs_direct_is_the_kvs_services_bound_methods_and_nothing_else():
    ctx = ServiceContext(rank=0, size=1, owner=1000, hostname="h0", hosts=("h0",),
                         attrs={}, rpc=None, send=None, respond=lambda m: None,
                         publish=None, state=lambda: "run", at_least=lambda s: False)
    svc = KVSService(ctx)
    try:
        view = kvs_direct.view(svc)
        assert isinstance(view, kvs_direct.KVSDirect) and not isinstance(view, KVSService)
        assert set(type(view).__slots__) == _members(kvs_direct.KVSDirect)
        view.commit([{"key": "a.b", "value": 1}])
        view.append("a.log", {"name": "x"})
        assert svc.lookup("a.b") == view.lookup("a.b") == 1
        assert view.lookup("a.log") == [{"name": "x"}] and view.durable is False
        assert view.value(view.root["a"]["log"]) == [{"name": "x"}]
    finally:
        svc.stop()


def _build_services() -> ast.FunctionDef:
    tree_ = ast.parse(pathlib.Path(broker.__file__).read_text())
    return next(n for n in ast.walk(tree_)
                if isinstance(n, ast.FunctionDef) and n.name == "_build_services")


def test_the_broker_hands_no_service_another_services_object():
    """In the wiring, a name bound to a service (`store = kvs.KVSService(ctx)`) is
    never an argument of another call, bare or inside a lambda (as `kvs=store` or
    `known_job=lambda i: i in jm.jobs` were): only what a declared interface makes
    of it (kvs_direct.view(store)), and its own parts for the broker (store.store)."""
    fn = _build_services()
    services = {t.id for n in ast.walk(fn) if isinstance(n, ast.Assign)
                and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Attribute)
                and n.value.func.attr.endswith("Service") for t in n.targets
                if isinstance(t, ast.Name)}
    assert "store" in services, "the scan found no service: it no longer matches the code"
    found = []
    for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
        if isinstance(call.func, ast.Attribute) and call.func.attr == "view":
            continue            # kvs_direct.view(store): the declared interface
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            if isinstance(arg, ast.Name) and arg.id in services:
                found.append(ast.unparse(arg))
            elif isinstance(arg, ast.Lambda):
                found += [ast.unparse(arg) for n in ast.walk(arg.body)
                          if isinstance(n, ast.Name) and n.id in services]
    assert found == []


class _View:
    """Just the OverlayView: no Overlay, no broker."""

    def __init__(self):
        self.topology = tree.Topology.kary(3, 2)
        self.hostname = "h0"
        self.started = 100.0
        self.membership = {0: "online", 1: "online", 2: "lost"}
        self.membership_since = {0: 100.0, 1: 101.0, 2: 150.0}

    def health(self) -> dict:
        return {"rank": 0}


def test_overlay_status_from_a_plain_view():
    ctx = ServiceContext(rank=0, size=3, owner=1000, hostname="h0", hosts=("h0", "h1", "h2"),
                         attrs={"tbon.topo": "kary:2"}, rpc=None, send=None,
                         respond=lambda m: None, publish=None, state=lambda: "run",
                         at_least=lambda s: False)
    svc = overlay.OverlayService(ctx, overlay=_View(), on_membership=lambda cb: None)
    out = svc.status(Message.request("overlay.status", {}), None)
    assert [(r["rank"], r["hostname"], r["state"], r["status"], r["since"])
            for r in out["ranks"]] == [
        (0, "h0", "online", "degraded", 100.0), (1, "h1", "online", "full", 101.0),
        (2, "h2", "lost", "lost", 150.0)]
    assert out["hostname"] == "h0" and svc.health(None, None) == {"rank": 0}
