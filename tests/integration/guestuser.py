"""Run the fluxlite CLI, or a Python snippet, as a guest user of an instance.

The instance's local socket is its owner's (mode 0600), so the one user who can
reach it besides the owner is root, and a test needs a process that reaches it
and yet is another user.  The broker takes a client's uid from the connection
(SO_PEERCRED: the effective uid at connect), and the kernel checks the socket's
mode against the filesystem uid.  A root test process can have both: the child
sets its effective uid to the guest's and keeps filesystem uid 0 (setfsuid,
allowed because its real and saved uids stay 0), so it connects, and the broker
sees the guest's uid, with the user role where the instance admits guests
(access.allow-guest-user).  Nothing else of the child changes: the same
interpreter and checkout, run from the test's own process tree.
"""

from __future__ import annotations

import os
import subprocess
import sys

from fluxlite.testing import missing_prerequisite

# uids of no account: the broker needs only a number
GUEST = 61234
OTHER_GUEST = 61235

_PRELUDE = """\
import ctypes, os, sys
uid = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
os.setresgid(-1, uid, -1)
os.setresuid(-1, uid, -1)
# file access as root again (the socket is the owner's); the broker sees `uid`
if libc.setfsuid(0) < 0 or libc.setfsgid(0) < 0 or os.geteuid() != uid:
    sys.exit("guestuser: could not take the guest's uid")
"""

_CLI = _PRELUDE + """\
sys.argv = ["fluxlite"] + sys.argv[2:]
from fluxlite.cli import main
sys.exit(main())
"""


def need_root() -> None:
    if os.geteuid() != 0:
        missing_prerequisite("a guest user's client needs root (to take another uid "
                             "and still reach the owner's socket)")


def cli(inst, uid: int, *args, timeout: float = 60) -> subprocess.CompletedProcess:
    """`fluxlite ARGS...` against `inst` as user `uid`."""
    need_root()
    return subprocess.run([sys.executable, "-c", _CLI, str(uid), *map(str, args)],
                          env=inst.env, capture_output=True, text=True, timeout=timeout)


def python(inst, uid: int, code: str, *, timeout: float = 60) -> subprocess.CompletedProcess:
    """Python `code` run as user `uid` (a `Handle()` in it reaches `inst`)."""
    need_root()
    return subprocess.run([sys.executable, "-c", _PRELUDE + code, str(uid)], env=inst.env,
                          capture_output=True, text=True, timeout=timeout)
