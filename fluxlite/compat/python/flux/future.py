"""`flux.future`: Flux's futures over fluxlite's handle.

A future's state (`pimpl`, what flux_future_t is in Flux) holds its results in
order: a plain RPC gets one, a streaming RPC one per response; `get()` reads the
first, `reset()` drops it so the next can be read.  `then(cb, ...)` runs `cb`
from the handle's reactor (Flux.reactor_run, or a blocking get/wait_for on any
future of that handle) once a result is there, again after each reset.
Several Future objects may share one state (`Future(other)`), as in Flux."""

from __future__ import annotations

import errno
import os
import time

from fluxlite.errors import AlreadyExists, FluxliteError, RPCTimeout


def default_handle():
    """This thread's shared Flux handle (flux.core.handle sets it: it imports us)."""
    raise RuntimeError("flux.core.handle is not imported")


class FutureState:
    """Results (value, errnum, errstr) in arrival order, a then-callback, an
    optional init callback run on first use (FutureExt), and the handle whose
    reactor runs it all."""

    def __init__(self, flux_handle=None, init=None):
        self.flux = flux_handle
        self.results: list = []
        self.then = None          # (callback, args, kwargs)
        self.init = init
        self.ended = False        # no more results will come (a stream ended)
        self.streaming = False    # many results may come (a streaming RPC)
        self.reactor_only = False  # its then-callback runs only from reactor_run
        self.delivered = False    # a result came at some point

    def fulfill(self, value=None, errnum: int = 0, errstr: str = "") -> None:
        self.delivered = True
        self.results.append((value, errnum, errstr))
        # the then-callback runs when the future becomes ready; the next result
        # waits for a reset() (as in Flux: a callback that does not reset is not
        # called again)
        if len(self.results) == 1 and self.then is not None and self.flux is not None:
            self.flux._ready(self)

    def fulfill_error(self, errnum: int, errstr: str = "") -> None:
        self.fulfill(None, errnum, errstr)

    def start(self) -> None:
        if self.init is not None:
            init, self.init = self.init, None
            init()


def _error(errnum: int, errstr: str) -> OSError:
    return FluxliteError(errstr or os.strerror(errnum), errnum)


class Future:
    """Flux's Future: get(), wait_for(timeout), is_ready(), then(cb, *args, **kw),
    reset(), get_flux(), get_reactor(), error_string()."""

    def __init__(self, future_handle=None, flux_handle=None, **_):
        if isinstance(future_handle, Future):
            self.pimpl = future_handle.pimpl
        elif isinstance(future_handle, FutureState):
            self.pimpl = future_handle
        else:
            self.pimpl = FutureState(flux_handle)

    # -- the result ---------------------------------------------------------
    def _result(self):
        self.wait_for()
        value, errnum, errstr = self.pimpl.results[0]
        if errnum:
            raise _error(errnum, errstr)
        return value

    def get(self):
        """Wait for the result; raise its error as OSError.  A plain Future's value
        is None (subclasses give theirs)."""
        self._result()
        return None

    def is_ready(self) -> bool:
        self.pimpl.start()
        return bool(self.pimpl.results)

    def wait_for(self, timeout: float = -1.0) -> Future:
        """Block until ready; OSError(ETIMEDOUT) after `timeout` seconds (<0: never)."""
        self.pimpl.start()
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        while not self.pimpl.results:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0 or self.pimpl.flux is None:
                raise RPCTimeout("future not fulfilled within the timeout")
            self.pimpl.flux._run_once(left)
        return self

    def error_string(self) -> str | None:
        if not self.pimpl.results:
            return None
        _, errnum, errstr = self.pimpl.results[0]
        return (errstr or os.strerror(errnum)) if errnum else None

    def reset(self) -> None:
        """Drop the current result: the next one (a stream's) becomes current and
        the then-callback runs again when it is there."""
        if self.pimpl.results:
            self.pimpl.results.pop(0)
        if self.pimpl.results and self.pimpl.then is not None and self.pimpl.flux:
            self.pimpl.flux._ready(self.pimpl)

    def then(self, callback, *args, **kwargs) -> Future:
        """Run callback(future, *args, **kwargs) from the reactor once ready; a
        second then() on one future is OSError(EEXIST), as Flux."""
        if self.pimpl.then is not None:
            raise AlreadyExists("this future already has a then-callback")
        timeout = kwargs.pop("timeout", -1.0)
        if args and "arg" in kwargs:
            raise ValueError("then(): give `arg` or positional arguments, not both")
        if "arg" in kwargs:
            args = (kwargs.pop("arg"),)
        self.pimpl.then = (self, callback, args, kwargs)
        if self.pimpl.flux is not None:
            self.pimpl.flux._watch_future(self.pimpl)
            if timeout is not None and timeout >= 0:
                self._time_limit(timeout)
        self.pimpl.start()
        if self.pimpl.results and self.pimpl.flux is not None:
            self.pimpl.flux._ready(self.pimpl)
        return self

    def _time_limit(self, timeout: float) -> None:
        """then(timeout=T): if nothing came within T seconds, the future fails with
        ETIMEDOUT (its callback then sees it).  The timer does not keep the
        reactor running on its own."""
        state = self.pimpl

        def expire(*_):
            if not state.results and not state.ended and not state.delivered:
                state.ended = True
                state.fulfill_error(errno.ETIMEDOUT, "future timed out")

        timer = state.flux.timer_watcher_create(timeout, expire)
        timer.daemon = True
        timer.start()

    def get_flux(self):
        return self.pimpl.flux

    def get_reactor(self):
        return self.pimpl.flux

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class FutureExt(Future):
    """A future whose result Python code supplies: init_cb(future) runs on first
    get/then/wait and calls future.fulfill(value) or fulfill_error(errnum, errstr)."""

    def __init__(self, init_cb=None, flux_handle=None):
        if flux_handle is None:
            flux_handle = default_handle()
        super().__init__(FutureState(flux_handle, init=lambda: init_cb(self)))

    def get(self):
        return self._result()

    def fulfill(self, result=None) -> None:
        self.pimpl.fulfill(result)

    def fulfill_error(self, errnum: int = errno.EINVAL, errstr: str = "") -> None:
        self.pimpl.fulfill_error(errnum, errstr)


def rpc_future(flux_handle, pending) -> FutureState:
    """The state of an RPC's future, fed by the PendingRPC's responses."""
    state = FutureState(flux_handle)
    state.streaming = pending.streaming

    def on_response(msg):
        if msg.errnum or not pending.streaming:
            state.ended = True
        state.fulfill(msg.payload, msg.errnum, msg.errstr if msg.errnum else "")

    pending.on_response = on_response
    return state

