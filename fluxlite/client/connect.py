"""Where a client connects and who it says it is.

FLUXLITE_URI selects the instance: `local://<rundir>/local-<rank>` (an ipc
socket on this machine) or `ipc://` / `tcp://` endpoints as ZeroMQ spells
them.  Inside a job it points at the enclosing instance.

A client's messages carry its uid for the record, but the broker does not take
its word for it: the local endpoint replaces userid and role with what the
connection itself says (see fluxlite/router/local.py).
"""

from __future__ import annotations

import errno
import os

from ..errors import FluxliteError, UsageError
from ..protocol.message import ROLE_OWNER

ENV_URI = "FLUXLITE_URI"


def resolve_uri(uri: str | None = None) -> str:
    """The ZeroMQ endpoint for `uri` (default: $FLUXLITE_URI); a clear error if none."""
    uri = uri or os.environ.get(ENV_URI)
    if not uri:
        raise FluxliteError(
            "no instance: FLUXLITE_URI is not set (run inside `fluxlite start`, "
            "or set FLUXLITE_URI to an instance's local-uri)", 2)
    if uri.startswith(("local://", "ipc://")):
        path = uri.partition("://")[2]
        _check_listening(uri, path)
        return "ipc://" + path
    if uri.startswith("tcp://"):
        if not uri[len("tcp://"):]:
            raise UsageError(f"invalid URI {uri!r}: expected tcp://HOST:PORT")
        return uri
    raise UsageError(f"unsupported URI {uri!r}: expected local://PATH, ipc://PATH or "
                     "tcp://HOST:PORT")


def not_a_client_socket(uri: str) -> str:
    return (f"{uri} is not a local (client) socket of a broker: use the instance's "
            "local-uri (`fluxlite getattr local-uri`), local://RUNDIR/local-RANK")


def _check_listening(uri: str, path: str) -> None:
    """Fail at once, with the reason, if nothing listens at a local socket path, or if
    the path is a broker's tree socket (tbon-RANK), where clients are not served."""
    import socket
    if not path:
        raise UsageError(f"invalid URI {uri!r}: no socket path (expected "
                         "local://RUNDIR/local-RANK)")
    if os.path.basename(path).startswith("tbon-"):
        raise FluxliteError(not_a_client_socket(uri), errno.EINVAL)
    if not os.path.exists(path):
        raise FluxliteError(f"no instance at {uri}: {path} does not exist", errno.ENOENT)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
    except OSError as exc:
        raise FluxliteError(f"no instance at {uri}: {exc.strerror} (has it exited?)",
                            errno.ECONNREFUSED) from None
    finally:
        s.close()


def credentials() -> tuple[int, int]:
    """(userid, role) written on outgoing messages; the broker replaces both."""
    return os.getuid(), ROLE_OWNER
