"""`fluxlite compat env`: the shell lines that turn Flux compatibility on."""

from __future__ import annotations

import pathlib
import shlex
import sys

import click

import fluxlite

from ..util.compat import ENV_VAR
from .common import HELP


@click.group(context_settings=HELP)
def compat():
    """Flux compatibility: a `flux` command, and FLUX_* variables in instances."""


@compat.command(context_settings=HELP)
def env():
    """Print the lines for `eval "$(fluxlite compat env)"`: a `flux` command on PATH,
    a `flux` Python package on PYTHONPATH, and FLUX_URI, FLUX_JOB_ID, FLUX_TASK_RANK... in instances started after it."""
    root = pathlib.Path(fluxlite.__file__).resolve().parent / "compat"
    bindir = shlex.quote(str(root / "bin"))
    click.echo(f"export {ENV_VAR}=1")
    click.echo(f"export FLUXLITE_FLUX_PYTHON={shlex.quote(sys.executable)}")
    click.echo(f'export PATH={bindir}:"$PATH"')
    pydir = shlex.quote(str(root / "python"))
    click.echo(f'export PYTHONPATH={pydir}${{PYTHONPATH:+:"$PYTHONPATH"}}')
