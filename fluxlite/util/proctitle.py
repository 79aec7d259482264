"""Truthful process names ("fluxlite-broker rank=3 ...") without losing the environment.

setproctitle normally moves the environment to make room for a long title,
which empties /proc/PID/environ; tests find every process an instance started
by an environment tag, so the title is limited to the room argv already has.
"""

from __future__ import annotations

import os


def set_title(title: str) -> None:
    os.environ["SPT_NOENV"] = "1"  # read when setproctitle first initialises
    try:
        from setproctitle import setproctitle
        setproctitle(title)
    except ImportError:
        pass
    finally:
        os.environ.pop("SPT_NOENV", None)
