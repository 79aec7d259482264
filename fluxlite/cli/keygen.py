"""`fluxlite keygen PATH`: make the CURVE certificate an instance's TCP overlay shares.

One file holding the key pair, in ZeroMQ's ZPL format, mode 0600 whatever the
umask; copy it to every host and name it in `[bootstrap] curve_cert`.  An
existing file is never replaced without --force, as `flux keygen` refuses
to.  The writing and checking live in util/curve.py.
"""

from __future__ import annotations

import click

from ..util import curve
from .common import HELP


@click.command(context_settings=HELP)
@click.option("-n", "--name", metavar="NAME", default=None,
              help="Name recorded in the certificate's metadata (default: this host's name).")
@click.option("-f", "--force", is_flag=True,
              help="Replace PATH if it exists (brokers holding the old certificate can then "
                   "no longer join).")
@click.argument("path", type=click.Path(dir_okay=False, writable=False))
def keygen(name, force, path):
    """Write a new CURVE certificate to PATH, readable only by you."""
    curve.write_certificate(path, curve.generate(), force=force,
                            metadata=curve.default_metadata(name))
