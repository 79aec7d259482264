"""The exception tree.  One error type crosses the wire: an errno name plus a sentence.

    FluxliteError            errnum (POSIX errno) + a human sentence; what an RPC fails with
     ├── ProtocolError       EPROTO: bytes that are not a valid message, or a payload of the wrong shape
     ├── HostUnreachable     EHOSTUNREACH: the peer (a broker, a rank) is gone; in-flight RPCs fail with it
     ├── NoService           ENOSYS: nothing registered the topic's service
     ├── RPCTimeout          ETIMEDOUT: no answer within the caller's bound
     ├── EndOfStream         ENODATA: a streaming RPC ended cleanly (not a failure)
     └── UsageError          EINVAL: bad input from a user (options, durations, ids)

`FluxliteError.from_errnum()` picks the subclass for an errno so that callers
can catch the kind of failure they care about.  The CLI turns any of these
into one line on stderr and a nonzero exit.
"""

from __future__ import annotations

import errno as _errno
import os


class FluxliteError(Exception):
    """An error with a POSIX errno and a sentence that says what was wrong."""

    default_errnum = _errno.EIO

    def __init__(self, message: str = "", errnum: int | None = None):
        self.errnum = self.default_errnum if errnum is None else errnum
        self.message = message or os.strerror(self.errnum)
        super().__init__(self.message)

    @property
    def errname(self) -> str:
        return _errno.errorcode.get(self.errnum, str(self.errnum))

    @staticmethod
    def from_errnum(errnum: int, message: str = "") -> "FluxliteError":
        cls = _BY_ERRNO.get(errnum, FluxliteError)
        return cls(message, errnum)


class ProtocolError(FluxliteError):
    default_errnum = _errno.EPROTO


class HostUnreachable(FluxliteError):
    default_errnum = _errno.EHOSTUNREACH


class NoService(FluxliteError):
    default_errnum = _errno.ENOSYS


class RPCTimeout(FluxliteError):
    default_errnum = _errno.ETIMEDOUT


class EndOfStream(FluxliteError):
    default_errnum = _errno.ENODATA


class UsageError(FluxliteError):
    default_errnum = _errno.EINVAL


_BY_ERRNO = {
    _errno.EPROTO: ProtocolError,
    _errno.EHOSTUNREACH: HostUnreachable,
    _errno.ENOSYS: NoService,
    _errno.ETIMEDOUT: RPCTimeout,
    _errno.ENODATA: EndOfStream,
    _errno.EINVAL: UsageError,
}
