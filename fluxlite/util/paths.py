"""Paths an instance uses: its private run directory, and where `fluxlite` lives.

Unix socket paths are limited to about 107 bytes, so run directories are short
(`/tmp/fl-XXXXXXXX`); every directory fluxlite makes for them is mode 0700,
whatever the umask.
"""

from __future__ import annotations

import os
import sys
import tempfile

from ..errors import UsageError


def make_rundir(base: str | None = None) -> str:
    """A short private run directory (Unix socket paths must stay under ~107 bytes)."""
    parent = base or ("/tmp" if os.path.isdir("/tmp") else tempfile.gettempdir())
    return tempfile.mkdtemp(prefix="fl-", dir=parent)


def make_private_dirs(path: str) -> None:
    """`mkdir -p path`, each directory it creates mode 0700 (umask or not); existing
    ones are left as they are."""
    path = os.path.abspath(path)
    missing = []
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            if not os.path.isdir(d):
                raise UsageError(f"--rundir: {d} exists and is not a directory") from None
            continue
        except OSError as exc:
            raise UsageError(f"--rundir: cannot create {d}: {exc.strerror}") from None
        os.chmod(d, 0o700)


def fluxlite_bindir() -> str | None:
    """Directory holding the `fluxlite` command that runs us, for PATH inside the instance."""
    candidates = [os.path.join(sys.prefix, "bin"), os.path.dirname(os.path.abspath(sys.argv[0]))]
    for d in candidates:
        if os.access(os.path.join(d, "fluxlite"), os.X_OK):
            return d
    return None
