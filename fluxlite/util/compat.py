"""The switch for Flux compatibility: FLUXLITE_FLUX_COMPAT=1 in the environment.

`eval "$(fluxlite compat env)"` sets it (with PATH for the `flux` command); an
instance started with it set passes it to its brokers and job shells, which then
set the FLUX_* variables beside the FLUXLITE_* ones."""

from __future__ import annotations

import os

ENV_VAR = "FLUXLITE_FLUX_COMPAT"


def flux_compat(env=None) -> bool:
    """Is Flux compatibility on in `env` (default: this process's environment)?"""
    return (os.environ if env is None else env).get(ENV_VAR, "") not in ("", "0")

# the FLUXLITE_* variables a task sees that get a FLUX_* twin with compatibility on
FLUX_MIRRORED = ("FLUXLITE_JOB_ID", "FLUXLITE_JOB_SIZE", "FLUXLITE_JOB_NNODES",
                 "FLUXLITE_JOB_TMPDIR", "FLUXLITE_URI")
