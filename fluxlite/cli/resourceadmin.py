"""`resource reload` and `resource acquire-mute` (Flux's flux-resource(1) testing
aids), added to the `resource` group.

reload PATH: a new inventory from an R (RFC 20) file, or with -x a directory of
hwloc `<rank>.xml` files, while no job holds resources (service/resource.py);
-f leaves out ranks the instance does not have.  acquire-mute: the scheduler is
told of no more resource changes.
"""

from __future__ import annotations

import json
import os
import re

import click

from ..errors import UsageError
from .common import HELP, handle


@click.command("reload", context_settings=HELP)
@click.option("-x", "--xml", is_flag=True, help="PATH is a directory of hwloc <rank>.xml "
                                                 "files.")
@click.option("-f", "--force", is_flag=True, help="Leave out ranks this instance does not "
                                                   "have, instead of failing.")
@click.argument("path")
def reload(xml, force, path):
    """Reload the resource inventory from PATH (an R file, or hwloc XML with -x);
    no job may hold resources meanwhile."""
    payload: dict = {"force": force}
    if xml:
        payload["xml"] = _xml_files(path)
    else:
        payload["R"] = _read(path, json.load)
        if not isinstance(payload["R"], dict):
            raise UsageError(f"{path}: not an R (RFC 20) object")
    with handle() as h:
        h.call("resource.reload", payload, nodeid=0)


def _read(path: str, parse=None):
    try:
        with open(path) as f:
            return parse(f) if parse else f.read()
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror}") from None
    except ValueError as exc:
        raise UsageError(f"{path}: not JSON: {exc}") from None


def _xml_files(path: str) -> dict[str, str]:
    if not os.path.isdir(path):
        raise UsageError(f"{path}: not a directory (-x reads <rank>.xml files from one)")
    found = {}
    for name in sorted(os.listdir(path)):
        m = re.fullmatch(r"([0-9]+)\.xml", name)
        if m:
            found[str(int(m.group(1)))] = _read(os.path.join(path, name))
    if not found:
        raise UsageError(f"{path}: no <rank>.xml files in it")
    return found


@click.command("acquire-mute", context_settings=HELP)
def acquire_mute():
    """Send the scheduler no more resource.acquire updates (Flux does this while an
    instance shuts down)."""
    with handle() as h:
        h.call("resource.acquire-mute", nodeid=0)


COMMANDS = (reload, acquire_mute)
