"""The exception tree.  One error type crosses the wire: an errno name plus a sentence.

    FluxliteError              errnum (POSIX errno) + a sentence; what an RPC fails with;
     │                         exit_code: what a command exits with when it ends on it (1)
     ├── ProtocolError         EPROTO: bytes that are not a valid message, a payload of
     │                         the wrong shape, a peer that breaks the protocol
     ├── UsageError            EINVAL: bad input from a user (options, durations, ids)
     │    ├── InvalidValue     a Python API argument out of range (also a ValueError)
     │    ├── InvalidType      a Python API argument of the wrong type (also a TypeError)
     │    └── FSDError         not a Flux Standard Duration (util/fsd.py; also a ValueError)
     ├── NotFound              ENOENT: no such job, key, attribute, process
     ├── IsADirectory          EISDIR: a KVS key that is a directory where a value was meant
     ├── NotADirectory         ENOTDIR: a KVS key that holds a value where a directory was meant
     ├── NoSuchProcess         ESRCH: no process by that label (rexec)
     ├── Unsatisfiable         EOVERFLOW: a request the resources can never satisfy
     ├── NoSpace               ENOSPC: no room (a store that cannot write)
     ├── NotSupported          ENOTSUP: a Flux feature fluxlite does not have (KVS namespaces)
     ├── PermissionDenied      EPERM: the caller may not do this
     ├── AlreadyExists         EEXIST: a name that is taken
     ├── Canceled              ECANCELED: the work was called off (a job being terminated)
     ├── NoChild               ECHILD: nothing to wait for
     ├── TryAgain              EAGAIN: not now (the instance is shutting down)
     ├── NoService             ENOSYS: nothing registered the topic's service or method
     ├── HostUnreachable       EHOSTUNREACH: the peer (a broker, a rank, a client) is gone;
     │    │                    in-flight RPCs fail with it
     │    └── ConnectFailed    a broker could not join its parent (refused, or timed out)
     ├── ConnectionRefused     ECONNREFUSED: no instance answers at that address
     ├── RPCTimeout            ETIMEDOUT: no answer within the caller's bound
     ├── EndOfStream           ENODATA: a streaming RPC ended cleanly (not a failure)
     ├── InvalidTransition     EINVAL: an event a state machine does not accept now
     ├── PluginError           EINVAL: a job shell plugin failed to load or to initialise
     ├── TooManyLinks          ELOOP: more KVS symbolic links on a key's way than are followed
     ├── JobException          a job ended by a fatal exception (a job future's result())
     ├── WrongThread           EBUSY: a blocking Handle used from another thread
     ├── PMIError              a PMI server refused a command (pmi/client.py)
     └── SlurmError            a test Slurm cluster did not come up (testing/slurm.py)

`FluxliteError(message, errnum)` is the class for that errno when it has one
(`FluxliteError("...", errno.ENOENT)` is a NotFound), so a raise site is caught by
its class whichever way it is spelt, and agrees with what the same errno becomes
when it arrives in a response (`Message.error()`).

Every one is an OSError whose `errno` is its errnum and whose `strerror` is its
sentence, as Flux's Python bindings raise them (code written for Flux catches
`except OSError` and reads `.errno`); str() stays the sentence alone.  NotFound,
PermissionDenied, AlreadyExists, IsADirectory, NotADirectory, NoSuchProcess and
ConnectionRefused are also FileNotFoundError, PermissionError, FileExistsError,
IsADirectoryError, NotADirectoryError, ProcessLookupError and ConnectionRefusedError,
the classes Python gives those errnos.

A caller catches the kind of failure it cares about (`except NotFound`) rather
than comparing numbers; `from_oserror()` is the one mapping of an OSError.  The CLI turns any
of these into one line on stderr and exits with `exit_code`.
"""

from __future__ import annotations

import errno as _errno
import os


class FluxliteError(OSError):
    """An error with a POSIX errno and a sentence that says what was wrong."""

    default_errnum = _errno.EIO

    def __new__(cls, message: str = "", errnum: int | None = None, *args, **kwargs):
        # `FluxliteError(msg, errno.ENOENT)` is a NotFound: every raise site is caught
        # by its class, the same class a response with that errno becomes on the wire
        if cls is FluxliteError and errnum is not None:
            cls = _BY_ERRNO.get(errnum, FluxliteError)
        return super().__new__(cls)

    def __init__(self, message: str = "", errnum: int | None = None, *, exit_code: int = 1):
        self.errnum = self.default_errnum if errnum is None else errnum
        self.message = message or os.strerror(self.errnum)
        self.exit_code = exit_code
        super().__init__(self.message)
        self.args = (self.message,)   # OSError's __new__ saw none (ours took them)

    # OSError's own fields, read from ours (they survive pickling with __dict__)
    errno = property(lambda self: self.errnum)
    strerror = property(lambda self: self.message)

    def __str__(self) -> str:
        return self.message

    @property
    def errname(self) -> str:
        return _errno.errorcode.get(self.errnum, str(self.errnum))

    @classmethod
    def from_oserror(cls, exc: OSError, what: str = "") -> FluxliteError:
        """The error for a failed system call, 'WHAT: strerror'.  On FluxliteError: the
        class of its errno, keeping the errno; on a subclass: that class and its errno,
        where the kind of failure matters more than the system call's
        (`UsageError.from_oserror(exc, "--rundir")`: the user named a bad path)."""
        reason = exc.strerror or str(exc)
        message = f"{what}: {reason}" if what else reason
        if cls is not FluxliteError:
            return cls(message)
        return FluxliteError(message, exc.errno if exc.errno is not None else _errno.EIO)


class ProtocolError(FluxliteError):
    default_errnum = _errno.EPROTO


class UsageError(FluxliteError):
    default_errnum = _errno.EINVAL


class InvalidValue(UsageError, ValueError):
    """A Python API argument out of range (a ValueError, as Flux's bindings raise)."""


class InvalidType(UsageError, TypeError):
    """A Python API argument of the wrong type (a TypeError, as Flux's bindings raise)."""


class JobException(FluxliteError):
    """A job ended by a fatal exception (cancel, timeout, node failure...): what a job
    future's result() raises.  `etype` and `note` are the exception's; `jobid` its job."""

    def __init__(self, message: str = "", errnum: int | None = None, *, jobid: int = 0,
                 etype: str = "", note: str = "", severity: int = 0):
        super().__init__(message, errnum)
        self.jobid, self.etype, self.note, self.severity = jobid, etype, note, severity


class WrongThread(FluxliteError):
    """A blocking Handle used from a thread other than the one that created it."""

    default_errnum = _errno.EBUSY


class NotFound(FluxliteError, FileNotFoundError):
    """ENOENT; also the OSError subclass Python gives that errno, as Flux's raise."""
    default_errnum = _errno.ENOENT


class PermissionDenied(FluxliteError, PermissionError):
    default_errnum = _errno.EPERM


class AlreadyExists(FluxliteError, FileExistsError):
    default_errnum = _errno.EEXIST


class IsADirectory(FluxliteError, IsADirectoryError):
    default_errnum = _errno.EISDIR


class NotADirectory(FluxliteError, NotADirectoryError):
    default_errnum = _errno.ENOTDIR


class NoSuchProcess(FluxliteError, ProcessLookupError):
    default_errnum = _errno.ESRCH


class Unsatisfiable(FluxliteError):
    """A request the instance's resources can never satisfy, even when idle."""
    default_errnum = _errno.EOVERFLOW


class NoSpace(FluxliteError):
    default_errnum = _errno.ENOSPC


class NotSupported(FluxliteError):
    default_errnum = _errno.ENOTSUP


class ConnectionRefused(FluxliteError, ConnectionRefusedError):
    default_errnum = _errno.ECONNREFUSED


class Canceled(FluxliteError):
    default_errnum = _errno.ECANCELED


class NoChild(FluxliteError):
    default_errnum = _errno.ECHILD


class TryAgain(FluxliteError):
    default_errnum = _errno.EAGAIN


class NoService(FluxliteError):
    default_errnum = _errno.ENOSYS


class HostUnreachable(FluxliteError):
    default_errnum = _errno.EHOSTUNREACH


class ConnectFailed(HostUnreachable):
    """A broker could not join its parent: refused at hello, or no answer in time."""


class RPCTimeout(FluxliteError):
    default_errnum = _errno.ETIMEDOUT


class EndOfStream(FluxliteError):
    default_errnum = _errno.ENODATA


class InvalidTransition(FluxliteError):
    default_errnum = _errno.EINVAL


class PluginError(FluxliteError):
    default_errnum = _errno.EINVAL


class TooManyLinks(FluxliteError):
    default_errnum = _errno.ELOOP


_BY_ERRNO = {
    _errno.EPROTO: ProtocolError,
    _errno.EINVAL: UsageError,
    _errno.ENOENT: NotFound,
    _errno.EPERM: PermissionDenied,
    _errno.EEXIST: AlreadyExists,
    _errno.EISDIR: IsADirectory,
    _errno.ENOTDIR: NotADirectory,
    _errno.ESRCH: NoSuchProcess,
    _errno.EOVERFLOW: Unsatisfiable,
    _errno.ENOSPC: NoSpace,
    _errno.ENOTSUP: NotSupported,
    _errno.ECONNREFUSED: ConnectionRefused,
    _errno.ECANCELED: Canceled,
    _errno.ECHILD: NoChild,
    _errno.EAGAIN: TryAgain,
    _errno.ENOSYS: NoService,
    _errno.EHOSTUNREACH: HostUnreachable,
    _errno.ETIMEDOUT: RPCTimeout,
    _errno.ENODATA: EndOfStream,
    _errno.ELOOP: TooManyLinks,
}
