"""The `flux` Python package over fluxlite, on PYTHONPATH only with Flux
compatibility on (`eval "$(fluxlite compat env)"` or `fluxlite start --flux-compat`).

It covers what workflow tools call from Flux's bindings, each call thin over
fluxlite's own API (fluxlite.client.sync.Handle, fluxlite.job): `flux.Flux`
(attr_get, rpc(...).get() for job-manager.drain and job-list.list/list-id),
`flux.job` and `flux.kvs.get`.  A call outside that surface raises
NotImplementedError naming it."""

from __future__ import annotations

import os

from fluxlite.client.sync import Handle
from fluxlite.errors import FluxliteError

__all__ = ["Flux"]


class NotInFluxlite(NotImplementedError, AttributeError):
    """A Flux binding fluxlite's flux package does not provide.  It is an
    AttributeError too, so `hasattr()` and `getattr(x, name, default)` see it as
    absent, as with a Flux that lacks it."""


def missing(owner: str, name: str):
    """The error for `owner.name` (a dunder lookup is a plain AttributeError)."""
    if name.startswith("__"):
        return AttributeError(name)
    return NotInFluxlite(f"{owner}.{name}: not in fluxlite's flux package (see the "
                         "Flux compatibility section of fluxlite's guide)")


class Flux:
    """A handle to the instance at `url` (default $FLUXLITE_URI, else $FLUX_URI).

    It wraps fluxlite's blocking Handle (`.handle`), which belongs to the thread
    that made it, as a Flux handle does; open one per thread."""

    def __init__(self, url: str | bytes | None = None, flags: int = 0, handle=None):
        if flags:
            raise NotImplementedError("flux.Flux(flags=...): fluxlite has no handle flags")
        if isinstance(url, bytes):
            url = url.decode()
        self.handle = handle if handle is not None else Handle(
            url or os.environ.get("FLUXLITE_URI") or os.environ.get("FLUX_URI"))

    def attr_get(self, name: str) -> str:
        """A broker attribute of this rank, e.g. size, local-uri, rundir; `version`
        is fluxlite's version (Flux gives flux-core's)."""
        if name == "version":
            from fluxlite import __version__
            return __version__
        try:
            return self.handle.getattr(name)
        except FluxliteError as exc:
            raise OSError(exc.errnum, exc.message) from None

    def rpc(self, topic: str, payload=None, nodeid=None, flags: int = 0):
        """A Flux RPC; only the topics workflow tools use are translated."""
        from . import _rpc
        return _rpc.rpc(self, topic, payload, nodeid, flags)

    def close(self) -> None:
        self.handle.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getattr__(self, name):
        raise missing("flux.Flux", name)


def _handle(flux_handle) -> Handle:
    """The fluxlite Handle behind a flux.Flux (or a fluxlite Handle as it is)."""
    return flux_handle.handle if isinstance(flux_handle, Flux) else flux_handle


def __getattr__(name):
    raise missing("flux", name)


from . import job, kvs  # noqa: E402,F401  (after Flux: they use it)
