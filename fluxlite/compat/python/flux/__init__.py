"""A minimal `flux` package over fluxlite, on PYTHONPATH only after
`eval "$(fluxlite compat env)"`: `flux.Flux` is fluxlite's blocking Handle, and
`flux.job` has JobspecV1, submit, wait and FluxExecutor."""

from __future__ import annotations

import os

from fluxlite.client.sync import Handle


class Flux(Handle):
    """A handle to the instance at `url` (default $FLUXLITE_URI, else $FLUX_URI)."""

    def __init__(self, url: str | None = None, flags: int = 0):
        if flags:
            raise NotImplementedError("flux.Flux(flags=...): fluxlite has no handle flags")
        super().__init__(url or os.environ.get("FLUXLITE_URI") or os.environ.get("FLUX_URI"))


from . import job  # noqa: E402,F401  (after Flux: flux.job uses it)
