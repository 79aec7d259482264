"""Jobs as concurrent.futures futures: `Executor`, modelled on Flux's FluxExecutor.

    from fluxlite.job import Jobspec
    from fluxlite.jobapi import Executor
    with Executor() as ex:                      # $FLUXLITE_URI, or Executor(uri)
        fut = ex.submit(Jobspec.from_command(["hostname"]))
        fut.add_event_callback("start", lambda f, e: print(f.jobid(), e.name))
        print(fut.result())                     # 0: the job's exit code

One background thread runs an asyncio loop with one AsyncHandle.  submit()
hands the jobspec to that loop (call_soon_threadsafe: no polling); the loop
submits it, sets the future's job id, and follows the job's main eventlog with
the one Follower (jobapi/api.py), so each event wakes exactly the future it
concerns.  Callbacks (jobid, event, done) run in that thread, in this order:
the job id, then the events as they are logged, then done.

A future's result() is what Flux's executor returns: the exit code of a job
that exited (its highest task exit code), minus the signal number of one
killed by a signal.  A job ended by a fatal exception (cancel, time limit,
node failure, a request that cannot be met) raises JobException instead.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
from collections import deque

from ..errors import FluxliteError, JobException, NotFound
from ..util import fluid
from . import api
from .api import Follower

log = logging.getLogger(__name__)

#: The main eventlog events a callback may ask for (Flux's MAIN_EVENTS that fluxlite logs).
EVENTS = frozenset({"submit", "validate", "depend", "priority", "alloc", "start", "exception",
                    "finish", "release", "free", "clean", "memo", "urgency"})


class Event:
    """One main eventlog entry, as Flux's EventLogEvent: name, timestamp, context."""

    __slots__ = ("name", "timestamp", "context")

    def __init__(self, entry: dict):
        self.name = entry.get("name", "")
        self.timestamp = entry.get("timestamp", 0.0)
        self.context = entry.get("context") or {}

    def __repr__(self) -> str:
        return f"Event({self.name!r}, {self.timestamp}, {self.context!r})"


def exit_status(status: int) -> int:
    """A wait status as Flux's executor reports it: the exit code, or -signal."""
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


class JobFuture(concurrent.futures.Future):
    """A future for one job: a concurrent.futures.Future with its job id and events."""

    EVENTS = EVENTS

    def __init__(self, executor: Executor):
        super().__init__()
        self._executor = executor
        self._jobid_ready = threading.Event()
        self._jobid: int | None = None
        self._jobid_error: BaseException | None = None
        self._lock = threading.RLock()
        self._jobid_callbacks: list = []
        self._event_callbacks: dict[str, list] = {}
        self._events: dict[str, list[Event]] = {}
        self._cancel_sent = False

    # ------------------------------------------------------------- job id
    def jobid(self, timeout: float | None = None) -> int:
        """The job's id once submitted; TimeoutError if not known within `timeout`,
        CancelledError if cancelled before submission, the submit error if refused."""
        if not self._jobid_ready.wait(timeout):
            raise concurrent.futures.TimeoutError(f"no job id within {timeout}s")
        if self._jobid_error is not None:
            raise self._jobid_error
        return self._jobid

    def add_jobid_callback(self, callback) -> JobFuture:
        """`callback(future)` once the job id is known (at once if it is)."""
        with self._lock:
            if not self._jobid_ready.is_set():
                self._jobid_callbacks.append(callback)
                return self
        self._invoke(callback)
        return self

    def _set_jobid(self, jobid: int | None, error: BaseException | None = None) -> None:
        with self._lock:
            if self._jobid_ready.is_set():
                return
            self._jobid, self._jobid_error = jobid, error
            self._jobid_ready.set()
            callbacks, self._jobid_callbacks = self._jobid_callbacks, []
        for cb in callbacks:
            self._invoke(cb)

    # ------------------------------------------------------------- events
    def add_event_callback(self, event: str, callback) -> JobFuture:
        """`callback(future, event)` for each `event` (a main eventlog event name) the
        job logs, including those logged before the callback was added."""
        if event not in EVENTS:
            raise ValueError(f"{event!r} is not a main eventlog event (one of "
                             f"{', '.join(sorted(EVENTS))})")
        with self._lock:
            self._event_callbacks.setdefault(event, []).append(callback)
            past = list(self._events.get(event, ()))
        for e in past:
            self._invoke(callback, e)
        return self

    def _set_event(self, e: Event) -> None:
        with self._lock:
            self._events.setdefault(e.name, []).append(e)
            callbacks = list(self._event_callbacks.get(e.name, ()))
        for cb in callbacks:
            self._invoke(cb, e)

    def _invoke(self, callback, *args) -> None:
        try:
            callback(self, *args)
        except Exception:  # a user's callback must not stop the executor
            log.exception("exception calling callback for %r", self)

    # ---------------------------------------------------------- completion
    def _check_thread(self) -> None:
        if not self.done() and threading.current_thread() is self._executor._thread:
            raise RuntimeError("cannot wait for a job future from inside its callback")

    def result(self, timeout: float | None = None):
        self._check_thread()
        return super().result(timeout)

    def exception(self, timeout: float | None = None):
        self._check_thread()
        return super().exception(timeout)

    def set_exception(self, exception) -> None:
        self._set_jobid(None, RuntimeError(f"job could not be submitted: {exception}"))
        super().set_exception(exception)

    def cancel(self) -> bool:
        """Cancel the future if its job is not submitted yet (True, as any future);
        otherwise cancel the job: True if a cancel was sent, False if the job is
        already done.  A job cancelled so ends with JobException (type cancel)."""
        if super().cancel():
            self._set_jobid(None, concurrent.futures.CancelledError())
            return True
        if self.done():
            return self.cancelled()
        with self._lock:
            if self._cancel_sent:
                return True
            self._cancel_sent = True
        self._executor._call(self._executor._cancel_job, self)
        return True


class Executor(concurrent.futures.Executor):
    """Run jobspecs as jobs of the instance at `uri` (default $FLUXLITE_URI).

    The connection is made before the constructor returns, so a wrong URI is
    an error here.  `shutdown()` (or leaving a `with` block) waits for the
    jobs; with `cancel_futures`, jobs that have not started are cancelled."""

    def __init__(self, uri: str | None = None, *, connect_timeout: float = 10.0):
        self._uri = uri
        self._loop = asyncio.new_event_loop()
        self._h = None
        self._futures: set[JobFuture] = set()     # submitted or attached, not yet clean
        self._followers: dict[JobFuture, Follower] = {}
        self._started: set[JobFuture] = set()
        self._queue: deque = deque()              # futures not yet handed to the loop
        self._shutdown = False
        self._broken: BaseException | None = None
        self._shutdown_lock = threading.Lock()
        self._stopped: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="fluxlite-executor",
                                        daemon=True)
        self._thread.start()
        if not self._ready.wait(connect_timeout):
            self._call(self._stop_now)
            raise FluxliteError(f"executor: no connection within {connect_timeout:g}s")
        if self._error is not None:
            self._thread.join()
            raise self._error

    # --------------------------------------------------------------- API
    def submit(self, jobspec, *args, **kwargs) -> JobFuture:
        """Submit a Jobspec (or a jobspec dict); the future completes when the job does.
        `urgency=` may be given (default 16)."""
        if args:
            raise TypeError("Executor.submit takes a jobspec, not a function and its "
                            "arguments")
        urgency = kwargs.pop("urgency", 16)
        if kwargs:
            raise TypeError(f"Executor.submit: unexpected arguments {', '.join(kwargs)}")
        request = api.submit_request(jobspec, urgency)  # TypeError for a wrong jobspec
        fut = JobFuture(self)
        with self._shutdown_lock:
            self._check_usable("submit")
            self._queue.append(fut)
            self._call(self._submit, fut, request)
        return fut

    def attach(self, jobid: int | str) -> JobFuture:
        """A future for a job submitted elsewhere (an id or its f58 form)."""
        jobid = fluid.parse(jobid) if isinstance(jobid, str) else int(jobid)
        fut = JobFuture(self)
        with self._shutdown_lock:
            self._check_usable("attach")
            self._queue.append(fut)
            self._call(self._attach, fut, jobid)
        return fut

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._shutdown_lock:
            first = not self._shutdown
            self._shutdown = True
        if first:
            self._call(self._begin_shutdown, cancel_futures)
        elif cancel_futures:
            self._call(self._cancel_pending)
        if wait and threading.current_thread() is not self._thread:
            self._thread.join()

    def _check_usable(self, what: str) -> None:
        if self._shutdown:
            raise RuntimeError(f"cannot {what}: the executor was shut down")
        if self._broken is not None:
            raise RuntimeError(f"cannot {what}: the executor is broken "
                               f"({self._broken})") from self._broken

    def __enter__(self) -> Executor:
        return self

    # ----------------------------------------------------- the loop's side
    def _call(self, fn, *args) -> None:
        try:
            self._loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed: the executor is gone
            pass

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._main())
        finally:
            self._loop.close()

    async def _main(self) -> None:
        from ..client.aio import AsyncHandle
        self._stopped = asyncio.Event()
        try:
            self._h = await AsyncHandle(self._uri, monitor=True).connect()
        except BaseException as exc:  # noqa: BLE001 - handed to the constructor
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        lost = asyncio.ensure_future(self._h.lost.wait())
        stopped = asyncio.ensure_future(self._stopped.wait())
        try:
            await asyncio.wait({lost, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            lost.cancel()
            stopped.cancel()
            if self._h.lost.is_set():
                with self._shutdown_lock:
                    self._broken = FluxliteError("connection to broker lost")
                self._fail_all(self._broken)
            for f in list(self._followers.values()):
                f.close()
            self._followers.clear()
            self._h.close()

    def _submit(self, fut: JobFuture, request: tuple[str, dict]) -> None:
        self._queue.remove(fut)
        if not fut.set_running_or_notify_cancel():
            self._maybe_stop()
            return
        self._futures.add(fut)
        try:
            p = self._h.rpc(*request)
        except FluxliteError as exc:
            self._finish(fut, exc)
            return

        def submitted(msg) -> None:
            if msg.errnum:
                self._finish(fut, msg.error())
                return
            fut._set_jobid(msg.payload["id"])
            self._follow(fut, msg.payload["id"])
        p.on_response = submitted

    def _attach(self, fut: JobFuture, jobid: int) -> None:
        self._queue.remove(fut)
        if not fut.set_running_or_notify_cancel():
            self._maybe_stop()
            return
        self._futures.add(fut)
        p = self._h.rpc(*api.info_request(jobid))

        def known(msg) -> None:
            if msg.errnum:
                err = msg.error()
                self._finish(fut, ValueError(f"job ID {fluid.f58(jobid)} does not match "
                                             f"any job: {err}") if isinstance(err, NotFound)
                             else err)
                return
            fut._set_jobid(jobid)
            self._follow(fut, jobid)
        p.on_response = known

    def _follow(self, fut: JobFuture, jobid: int) -> None:
        def on_entry(entry: dict) -> None:
            e = Event(entry)
            if e.name == "start":
                self._started.add(fut)
            fut._set_event(e)
            if fut.done():
                return
            if e.name == "finish":
                fut.set_result(exit_status(int(e.context.get("status", 0))))
            elif e.name == "exception" and e.context.get("severity", 0) == 0:
                etype, note = e.context.get("type", ""), e.context.get("note", "")
                fut.set_exception(JobException(
                    f"job {fluid.f58(jobid)}: {etype} exception" + (f": {note}" if note
                                                                   else ""),
                    jobid=jobid, etype=etype, note=note, severity=0))

        f = Follower(self._h, jobid, on_entry=on_entry,
                     on_done=lambda: self._finish(fut, f.error))
        self._followers[fut] = f
        f.start()

    def _finish(self, fut: JobFuture, error: BaseException | None) -> None:
        """The job's log can grow no more: complete the future if it is not yet."""
        if not fut.done():
            fut.set_exception(error or FluxliteError("job ended without a finish event"))
        f = self._followers.pop(fut, None)
        if f is not None:
            self._loop.call_soon(f.close)  # not from inside its own callback
        self._futures.discard(fut)
        self._started.discard(fut)
        self._maybe_stop()

    def _cancel_job(self, fut: JobFuture) -> None:
        if fut.done() or self._h is None or not self._h.connected:
            return
        if fut._jobid is None:
            # submitted, id not back yet: cancel as soon as it is
            fut.add_jobid_callback(lambda f: self._call(self._cancel_job, f))
            return
        try:
            self._h.rpc(*api.cancel_request(fut._jobid, "future cancelled"))
        except FluxliteError:
            pass

    def _begin_shutdown(self, cancel_futures: bool) -> None:
        if cancel_futures:
            self._cancel_pending()
        self._maybe_stop()

    def _cancel_pending(self) -> None:
        """cancel_futures: futures not handed over yet, and jobs not started."""
        for fut in list(self._queue):
            fut.cancel()
        for fut in list(self._futures):
            if fut not in self._started:
                fut.cancel()

    def _maybe_stop(self) -> None:
        if self._shutdown and not self._futures and not self._queue and self._stopped:
            self._stopped.set()

    def _stop_now(self) -> None:
        if self._stopped is not None:
            self._stopped.set()

    def _fail_all(self, exc: BaseException) -> None:
        for fut in list(self._queue):
            if fut.set_running_or_notify_cancel():
                fut.set_exception(exc)
        for fut in list(self._futures):
            if not fut.done():
                fut.set_exception(exc)
        self._futures.clear()
        self._queue.clear()
