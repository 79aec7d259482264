"""A small file system of its own (tmpfs) for tests of a full disk: root only."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess

from fluxlite.testing import find_tool, missing_prerequisite


@contextlib.contextmanager
def small_disk(path, size: str = "16m"):
    """A tmpfs of `size` mounted at `path` while the block runs."""
    if os.geteuid() != 0:
        missing_prerequisite("a full-disk test mounts a small tmpfs: it needs root "
                             "(run the tests as root, as CI does)")
    if find_tool("mount") is None:
        missing_prerequisite("a full-disk test needs `mount` (apt-get install mount)")
    os.makedirs(path, exist_ok=True)
    cp = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                        capture_output=True, text=True, timeout=30)
    if cp.returncode != 0:
        missing_prerequisite(f"cannot mount a tmpfs here: {cp.stderr.strip()}")
    try:
        yield str(path)
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


def fill(path) -> str:
    """Fill the file system holding directory `path`; returns the filler's path (remove
    it to free the space)."""
    filler = os.path.join(path, "filler")
    chunk = b"\0" * (1 << 16)
    with open(filler, "wb", buffering=0) as f:
        while True:
            try:
                f.write(chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                if len(chunk) == 1:
                    break
                chunk = chunk[:len(chunk) // 2]
    return filler
