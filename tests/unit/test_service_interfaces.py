"""Services get narrow interfaces, not the broker's parts: the overlay service reads
an OverlayView, the broker service changes a ClientRegistry.  Each uses nothing of
what it is given beyond its Protocol, and works with any object that has it."""

from __future__ import annotations

import ast
import inspect
import pathlib

import pytest

from fluxlite.protocol.message import Message
from fluxlite.service import broker_svc, overlay
from fluxlite.service.base import ServiceContext
from fluxlite.util import tree

pytestmark = pytest.mark.timeout(30)


def _members(proto) -> set[str]:
    names = set(getattr(proto, "__annotations__", {}))
    names |= {n for n, v in vars(proto).items() if inspect.isfunction(v)}
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
])
def test_a_service_uses_only_its_protocol(module, attr, proto, aliases):
    used = _used(module, attr, aliases)
    assert used, "the scan found nothing: it no longer matches the code"
    assert used <= _members(proto), f"beyond {proto.__name__}: {sorted(used - _members(proto))}"


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
