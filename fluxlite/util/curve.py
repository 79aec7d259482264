"""CURVE certificates for the TCP overlay: one file, ZeroMQ's ZPL format, owner-only.

An instance booted from a config file shares one certificate, made once with
`fluxlite keygen PATH` (as `flux keygen` does): every broker presents its
keys, and a broker accepts a peer only if the peer holds the same
certificate's key.  The file holds both keys, so it is a secret:

- `write_certificate()` creates it mode 0600 whatever the umask, atomically
  (a temporary file renamed into place), and never replaces an existing file
  unless asked to.  pyzmq's `zmq.auth.create_certificates()` writes a public
  and a secret file under umask-chosen modes, so it does not fit here.
- `load_certificate()` reads it back with pyzmq's ZPL reader
  (`zmq.auth.load_certificate`) after refusing a file that anyone but its
  owner can read or write, or that another user owns; it checks that the
  secret key is there and that the public key belongs to it.

`server_socket_options()` / `client_socket_options()` say how a socket
presents the certificate.  Errors are FluxliteError with EPERM for an unsafe
file and EINVAL for one that is not a certificate, naming the path.
"""

from __future__ import annotations

import datetime
import os
import socket as _socket
import stat
from dataclasses import dataclass

import zmq
import zmq.auth

from ..errors import AlreadyExists, FluxliteError, PermissionDenied, UsageError

KEY_LEN = 40  # a Z85-encoded 32-byte key


@dataclass(frozen=True)
class Certificate:
    """A CURVE key pair, each key 40 bytes of Z85 text."""
    public: bytes
    secret: bytes


def generate() -> Certificate:
    public, secret = zmq.curve_keypair()
    return Certificate(public, secret)


def to_zpl(cert: Certificate, metadata: dict[str, str] | None = None) -> str:
    """The certificate as a ZPL text (rfc.zeromq.org spec 4), as CZMQ and Flux write it."""
    lines = [
        f"#   ****  Generated on {datetime.datetime.now().isoformat(timespec='seconds')} "
        "by fluxlite keygen  ****",
        "#   ZeroMQ CURVE **Secret** Certificate",
        "#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.",
        "",
        "metadata",
    ]
    for key, value in (metadata or {}).items():
        if not key or any(not (c.isalnum() or c in "-_.") for c in key):
            raise UsageError(f"certificate metadata name {key!r}: use letters, digits, '-_.'")
        if any(c in value for c in '"\n\r') or not value.isprintable():
            raise UsageError(f"certificate metadata {key}={value!r}: no quotes or control "
                             "characters")
        lines.append(f'    {key} = "{value}"')
    lines += ["curve", f'    public-key = "{cert.public.decode()}"',
              f'    secret-key = "{cert.secret.decode()}"', ""]
    return "\n".join(lines)


def default_metadata(name: str | None = None) -> dict[str, str]:
    from .. import __version__
    host = _socket.gethostname()
    return {
        "name": name or host,
        "keygen.hostname": host,
        "keygen.time": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "keygen.userid": str(os.getuid()),
        "keygen.zmq-version": zmq.zmq_version(),
        "keygen.fluxlite-version": __version__,
    }


def write_certificate(path: str, cert: Certificate, *, force: bool = False,
                      metadata: dict[str, str] | None = None) -> None:
    """Write `cert` to `path`, mode 0600.  An existing file is an error unless `force`."""
    text = to_zpl(cert, metadata).encode()
    directory = os.path.dirname(os.path.abspath(path))
    if not force and os.path.lexists(path):
        raise AlreadyExists(f"{path} exists; not overwriting it (use --force to replace it)")
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise FluxliteError.from_oserror(exc, f"cannot create {path}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o600)     # the umask may have taken bits from 0600
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if force:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)           # fails if the path appeared meanwhile
            except FileExistsError:
                raise AlreadyExists(f"{path} exists; not overwriting it (use --force to "
                                    "replace it)") from None
    except OSError as exc:
        raise FluxliteError.from_oserror(exc, f"cannot write {path}") from None
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def load_certificate(path: str) -> Certificate:
    """Read a certificate written by `fluxlite keygen` (or `flux keygen`), refusing an
    unsafe file: one that group or others may access, or that another user owns."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise FluxliteError.from_oserror(exc, f"cannot read certificate {path}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"certificate {path} is not a regular file")
        if st.st_uid != os.geteuid():
            raise PermissionDenied(f"certificate {path} is owned by uid {st.st_uid}, not by "
                                   f"this user (uid {os.geteuid()})")
        mode = stat.S_IMODE(st.st_mode)
        if mode & 0o077:
            raise PermissionDenied(f"certificate {path} has mode {mode:04o}: others may read "
                                   f"it; make it readable only by its owner (chmod 600 {path})")
        try:
            public, secret = zmq.auth.load_certificate(f"/proc/self/fd/{fd}")
        except (ValueError, OSError):
            public = secret = None
    finally:
        os.close(fd)
    if not public or not secret:
        raise UsageError(f"{path} is not a CURVE secret certificate (it needs a public-key "
                         "and a secret-key; make one with `fluxlite keygen PATH`)")
    try:
        if len(public) != KEY_LEN or len(secret) != KEY_LEN or \
                zmq.curve_public(secret) != public:
            raise ValueError
    except (ValueError, zmq.ZMQError):
        raise UsageError(f"certificate {path}: its public-key does not belong to its "
                         "secret-key (or a key is not 40 characters of Z85)") from None
    return Certificate(public, secret)


def server_socket_options(cert: Certificate) -> dict[int, object]:
    """Socket options for the side that binds (a parent): it is the CURVE server."""
    return {zmq.CURVE_SERVER: 1, zmq.CURVE_SECRETKEY: cert.secret,
            zmq.CURVE_PUBLICKEY: cert.public}


def client_socket_options(cert: Certificate, server_public: bytes) -> dict[int, object]:
    """Socket options for the side that connects (a child) to a server with that key."""
    return {zmq.CURVE_SERVERKEY: server_public, zmq.CURVE_SECRETKEY: cert.secret,
            zmq.CURVE_PUBLICKEY: cert.public}


def apply(sock: zmq.Socket, options: dict[int, object]) -> None:
    """Set the options on a socket before it binds or connects."""
    for option, value in options.items():
        sock.setsockopt(option, value)
