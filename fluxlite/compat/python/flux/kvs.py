"""`flux.kvs.get(handle, key)`: a KVS value (fluxlite's kvs.get)."""

from __future__ import annotations


def get(flux_handle, key: str):
    """The value at `key`; KeyError-like OSError(ENOENT) if there is none, as Flux."""
    from fluxlite.errors import FluxliteError

    from . import _handle
    try:
        return _handle(flux_handle).call("kvs.get", {"key": key})["value"]
    except FluxliteError as exc:
        raise OSError(exc.errnum, exc.message) from None


def __getattr__(name):
    from . import missing
    raise missing("flux.kvs", name)
