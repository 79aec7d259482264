"""Paths an instance uses: its private run directory, and where `fluxlite` lives.

Unix socket paths are limited to about 107 bytes, so run directories are short
(`/tmp/fl-XXXXXXXX`); every directory fluxlite makes for them is mode 0700,
whatever the umask.

The run directory is the instance's wall: its sockets and logs are owner-only
too, but a directory others may write lets them replace a socket with their own
(and catch what the owner's commands send) or plant a symlink where a log goes.
So a run directory the user names (`--rundir`) is used only if it is a directory
owned by the user that nobody else may write; otherwise the launcher refuses it
with the reason and the fix.  It is not made private behind the user's back (its
mode is theirs to choose), and no private directory is made inside it: sockets
stay where the user asked for them, `<rundir>/local-0`, as in Flux.
"""

from __future__ import annotations

import os
import stat
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
            raise UsageError.from_oserror(exc, f"--rundir: cannot create {d}") from None
        os.chmod(d, 0o700)


def check_private_dir(path: str, what: str = "--rundir") -> None:
    """Refuse, with the reason and the fix, a run directory that is not ours alone:
    not a directory, owned by another user, not rwx for us, or writable by group or
    others (even with the sticky bit: others could still create names in it)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise UsageError.from_oserror(exc, f"{what}: cannot use {path}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{what}: {path} is not a directory")
    if st.st_uid != os.getuid():
        raise UsageError(f"{what}: {path} is owned by uid {st.st_uid}, not by you "
                         f"(uid {os.getuid()}): use a directory of your own")
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o700 != 0o700:
        raise UsageError(f"{what}: {path} has mode {mode:04o}: you need rwx on it "
                         f"(chmod u+rwx {path})")
    if mode & 0o022:
        raise UsageError(f"{what}: {path} has mode {mode:04o}: others may write to it and "
                         f"could replace the instance's sockets; use a directory only you "
                         f"can write (chmod go-w {path})")
    _check_room(path, what)


# what a probe writes in a run directory before an instance starts there: its KVS
# file, logs and sockets need at least this much
_PROBE_BYTES = 256 * 1024


def _check_room(path: str, what: str) -> None:
    """Refuse a run directory where nothing can be written (a read-only file system,
    a full disk) with one line, before any broker starts there."""
    probe = None
    try:
        fd, probe = tempfile.mkstemp(prefix=".probe-", dir=path)
        with os.fdopen(fd, "wb") as f:
            f.write(b"\0" * _PROBE_BYTES)
    except OSError as exc:
        raise UsageError.from_oserror(exc, f"{what}: cannot write in {path}") from None
    finally:
        if probe is not None:
            try:
                os.unlink(probe)
            except OSError:
                pass


def fluxlite_bindir() -> str | None:
    """Directory holding the `fluxlite` command that runs us, for PATH inside the instance."""
    candidates = [os.path.join(sys.prefix, "bin"), os.path.dirname(os.path.abspath(sys.argv[0]))]
    for d in candidates:
        if os.access(os.path.join(d, "fluxlite"), os.X_OK):
            return d
    return None
