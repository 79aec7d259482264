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
                 "FLUXLITE_JOB_TMPDIR", "FLUXLITE_URI", "FLUXLITE_KVS_NAMESPACE")

# the KVS namespace a command or the `flux` package works in when none is named
# (Flux's FLUX_KVS_NAMESPACE: a job's tasks get its guest namespace, job-ID)
KVS_NAMESPACE_VARS = ("FLUXLITE_KVS_NAMESPACE", "FLUX_KVS_NAMESPACE")


def kvs_namespace(env=None) -> str | None:
    """The default KVS namespace `env` (default: this process's) names, else None
    (the primary one)."""
    env = os.environ if env is None else env
    return next((env[v] for v in KVS_NAMESPACE_VARS if env.get(v)), None)


def compat_dirs() -> tuple[str, str]:
    """The directories of the `flux` command (for PATH) and the `flux` Python
    package (for PYTHONPATH) that fluxlite ships in fluxlite/compat."""
    import pathlib
    root = pathlib.Path(__file__).resolve().parent.parent / "compat"
    return str(root / "bin"), str(root / "python")


def enable(env) -> None:
    """Turn Flux compatibility on in `env` (a mapping, e.g. os.environ), as
    `eval "$(fluxlite compat env)"` does in a shell: the switch, the interpreter the
    `flux` command runs with, and the two directories in front of PATH and PYTHONPATH."""
    import sys
    bindir, pydir = compat_dirs()
    env[ENV_VAR] = "1"
    env["FLUXLITE_FLUX_PYTHON"] = sys.executable
    for var, d in (("PATH", bindir), ("PYTHONPATH", pydir)):
        parts = [p for p in env.get(var, "").split(os.pathsep) if p and p != d]
        env[var] = os.pathsep.join([d, *parts])
