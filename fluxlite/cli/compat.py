"""`fluxlite compat env`: the shell lines that turn Flux compatibility on."""

from __future__ import annotations

import shlex
import sys

import click

from ..util.compat import ENV_VAR, compat_dirs
from .common import HELP


@click.group(context_settings=HELP)
def compat():
    """Flux compatibility: a `flux` command, and FLUX_* variables in instances."""


@compat.command(context_settings=HELP)
def env():
    """Print the lines for `eval "$(fluxlite compat env)"`: a `flux` command on PATH,
    a `flux` Python package on PYTHONPATH, and FLUX_URI, FLUX_JOB_ID, FLUX_TASK_RANK...
    in instances started after it (`fluxlite start --flux-compat` does the same for
    one instance)."""
    bindir, pydir = (shlex.quote(d) for d in compat_dirs())
    click.echo(f"export {ENV_VAR}=1")
    click.echo(f"export FLUXLITE_FLUX_PYTHON={shlex.quote(sys.executable)}")
    click.echo(f'export PATH={bindir}:"$PATH"')
    click.echo(f'export PYTHONPATH={pydir}${{PYTHONPATH:+:"$PYTHONPATH"}}')
