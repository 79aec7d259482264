"""The `flux` Python package over fluxlite, on PYTHONPATH only with Flux
compatibility on (`eval "$(fluxlite compat env)"` or `fluxlite start --flux-compat`).

It follows flux-core's public Python API (src/bindings/python/flux/): `flux.Flux`
(flux.core.handle: rpc to any service topic, attributes, events, watchers and
the reactor), `flux.future`, `flux.constants`, `flux.job`, `flux.kvs`.  Each
call is thin over fluxlite's own client and services; errors are OSError with
Flux's errno.  A name fluxlite does not provide raises NotImplementedError (an
AttributeError too) naming it."""

from __future__ import annotations

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


from .core.handle import Flux  # noqa: E402


def _handle(flux_handle):
    """The fluxlite Handle behind a flux.Flux (or a fluxlite Handle as it is)."""
    return flux_handle.handle if isinstance(flux_handle, Flux) else flux_handle


def __getattr__(name):
    raise missing("flux", name)


from . import constants, job, kvs  # noqa: E402,F401  (after Flux: they use it)
