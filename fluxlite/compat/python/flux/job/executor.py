"""`flux.job.executor`: FluxExecutor and FluxExecutorFuture, as Flux's.

The executor hands each submit or attach, as a package, to a worker thread
(_FluxExecutorThread) through a deque.  The worker has its own flux.Flux
handle and runs its reactor in turns of `poll_interval`: it sends the waiting
submissions (submit_async), and for each job watches the main eventlog
(event_watch_async), passing every event to the future's event callbacks.  A
`finish` event completes the future with the job's exit code (-signal if it
was killed), a fatal exception with flux.job.JobException; a job id that names
no job, with ValueError.  A future's cancel() succeeds only while its package
waits in the deque (as any concurrent.futures future that is not running):
cancel a job with flux.job.cancel."""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import os
import threading

from .. import Flux
from . import event_watch_async, submit_async, submit_get_id  # noqa: F401 (patchable)
from .event import MAIN_EVENTS, JobException

__all__ = ["FluxExecutor", "FluxExecutorFuture"]

log = logging.getLogger(__name__)


class _SubmitPackage:
    """A submission waiting for the worker: submit_async's arguments, the future."""

    def __init__(self, submit_args, submit_kwargs, future):
        self.submit_args, self.submit_kwargs, self.future = submit_args, submit_kwargs, future


class _AttachPackage:
    """An attach waiting for the worker: the job id, the future."""

    def __init__(self, jobid, future):
        self.jobid, self.future = jobid, future


def _exit_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


class FluxExecutorFuture(concurrent.futures.Future):
    """A job's future: jobid(), add_jobid_callback(), add_event_callback() for the
    main eventlog's events, and concurrent.futures' result(), exception(),
    cancel(), add_done_callback().  `owning_thread_id` is the thread that runs its
    callbacks: waiting for an unfinished future there is a RuntimeError (it
    would never finish)."""

    def __init__(self, owning_thread_id, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._owner = owning_thread_id
        self._jobid = None
        self._jobid_error = None
        self._jobid_set = threading.Event()
        self._jobid_callbacks: list = []
        self._events: dict[str, list] = collections.defaultdict(list)
        self._event_callbacks: dict[str, list] = collections.defaultdict(list)
        self._lock = threading.RLock()

    # -- job id -----------------------------------------------------------------------
    def _set_jobid(self, jobid, exc=None) -> None:
        with self._lock:
            if self._jobid_set.is_set():
                raise RuntimeError("this future's job id is already set")
            self._jobid, self._jobid_error = jobid, exc
            self._jobid_set.set()
            callbacks = list(self._jobid_callbacks)
        for cb in callbacks:
            self._invoke(cb)

    def jobid(self, timeout=None):
        """The job's id once submitted: TimeoutError if not within `timeout`,
        CancelledError if cancelled first, RuntimeError if the submission failed."""
        if self._jobid_set.wait(timeout):
            if self._jobid_error is not None:
                raise self._jobid_error
            return self._jobid
        if self.cancelled():
            raise concurrent.futures.CancelledError()
        raise concurrent.futures.TimeoutError(f"no job id within {timeout}s")

    def add_jobid_callback(self, callback) -> FluxExecutorFuture:
        """callback(future) once the job id is known (now, if it is)."""
        with self._lock:
            if not self._jobid_set.is_set():
                self._jobid_callbacks.append(callback)
                return self
        self._invoke(callback)
        return self

    # -- events -----------------------------------------------------------------------
    def add_event_callback(self, event: str, callback) -> FluxExecutorFuture:
        """callback(future, event) for each `event` of the job's main eventlog,
        those already logged included."""
        if event not in FluxExecutor.EVENTS:
            raise ValueError(f"{event!r} is not a main eventlog event")
        with self._lock:
            self._event_callbacks[event].append(callback)
            past = list(self._events[event])
        for e in past:
            self._invoke(callback, e)
        return self

    def _set_event(self, log_event) -> None:
        if log_event.name not in FluxExecutor.EVENTS:
            raise ValueError(f"{log_event.name!r} is not a main eventlog event")
        with self._lock:
            self._events[log_event.name].append(log_event)
            callbacks = list(self._event_callbacks[log_event.name])
        for cb in callbacks:
            self._invoke(cb, log_event)

    def _invoke(self, callback, *args) -> None:
        try:
            callback(self, *args)
        except Exception:
            log.exception("exception calling callback for %r", self)

    # -- completion -------------------------------------------------------------------
    def _no_deadlock(self) -> None:
        if not self.done() and threading.get_ident() == self._owner:
            raise RuntimeError("cannot wait for an unfinished future from the thread "
                               "that runs its callbacks")

    def result(self, timeout=None):
        self._no_deadlock()
        return super().result(timeout)

    def exception(self, timeout=None):
        self._no_deadlock()
        return super().exception(timeout)

    def add_done_callback(self, fn) -> FluxExecutorFuture:
        super().add_done_callback(fn)
        return self

    def set_exception(self, exception) -> None:
        with self._lock:
            if not self._jobid_set.is_set():
                self._set_jobid(None, RuntimeError(
                    f"job could not be submitted due to {exception!r}"))
        super().set_exception(exception)

    def cancel(self, *args, **kwargs) -> bool:
        """Cancel the future if its job is not submitted yet (True), else False."""
        if self.cancelled():
            return True
        if not super().cancel(*args, **kwargs):
            return False
        with self._lock:
            if not self._jobid_set.is_set():
                self._set_jobid(None, concurrent.futures.CancelledError())
        return True


class _FluxExecutorThread(threading.Thread):
    """The worker: submits and attaches the packages of `deque`, follows each job
    to its end, and stops once `exit_event` is set and no work remains.  If it
    fails, `broken_event` is set and every future it holds fails with the error."""

    def __init__(self, broken_event, exit_event, deque, poll_interval, handle_args,
                 handle_kwargs, **kwargs):
        super().__init__(**kwargs)
        self.__broken_event = broken_event
        self.__exit_event = exit_event
        self.__submission_queue = deque
        self.__poll_interval = poll_interval
        self.__running_user_futures: set = set()
        self.__flux_handle = Flux(*handle_args, **handle_kwargs)

    def run(self) -> None:
        self.__flux_handle.handle.adopt()    # made by the executor's thread, used here
        try:
            self.__run()
        except Exception as exc:
            self.__broken_event.set()
            while self.__submission_queue:
                package = self.__submission_queue.popleft()
                if package is not None:
                    self.__running_user_futures.add(package.future)
            for fut in self.__running_user_futures:
                if not fut.done():
                    fut.set_exception(exc)
            self.__running_user_futures.clear()
            raise
        finally:
            if threading.current_thread() is self:    # started, not run() called inline
                self.__flux_handle.close()

    def __work_remains(self) -> bool:
        return bool(self.__submission_queue or not self.__exit_event.is_set()
                    or self.__running_user_futures)

    def __run(self) -> None:
        while self.__work_remains():
            self.__submit_new_jobs()
            turn = self.__flux_handle.timer_watcher_create(
                self.__poll_interval, lambda handle, *_: handle.reactor_stop())
            turn.start()
            try:
                if self.__flux_handle.reactor_run() < 0:
                    raise RuntimeError("reactor start failed")
            finally:
                turn.stop()

    def __submit_new_jobs(self) -> None:
        while self.__submission_queue:
            package = self.__submission_queue.popleft()
            if isinstance(package, _SubmitPackage):
                self.__submit(package)
            elif isinstance(package, _AttachPackage):
                self.__attach(package)

    def __submit(self, package) -> None:
        fut = package.future
        if not fut.set_running_or_notify_cancel():
            return
        try:
            submit_async(self.__flux_handle, *package.submit_args,
                         **package.submit_kwargs).then(self.__submitted, fut)
        except Exception as exc:
            fut.set_exception(exc)
            return
        self.__running_user_futures.add(fut)

    def __submitted(self, submit_future, user_future) -> None:
        try:
            jobid = submit_get_id(submit_future)
        except Exception as exc:
            user_future.set_exception(exc)
            self.__running_user_futures.discard(user_future)
            return
        user_future._set_jobid(jobid)
        self.__follow(user_future, jobid)

    def __attach(self, package) -> None:
        fut = package.future
        if not fut.set_running_or_notify_cancel():
            return
        jobid = package.jobid
        if not isinstance(jobid, int):
            fut.set_exception(TypeError(f"a job id is an integer, not "
                                        f"{type(jobid).__name__}"))
            return
        if not 0 <= jobid < 2 ** 64:
            fut.set_exception(OverflowError(f"job id {jobid} is out of range"))
            return
        self.__running_user_futures.add(fut)
        self.__follow(fut, jobid)

    def __follow(self, user_future, jobid) -> None:
        try:
            watch = event_watch_async(self.__flux_handle, jobid)
        except FileNotFoundError:
            user_future.set_exception(ValueError("job ID does not match any job"))
            self.__running_user_futures.discard(user_future)
            return
        except Exception as exc:
            user_future.set_exception(exc)
            self.__running_user_futures.discard(user_future)
            return
        watch.then(self.__event_update, user_future)

    def __event_update(self, event_future, user_future) -> None:
        try:
            event = event_future.get_event()
        except FileNotFoundError:
            event, error = None, ValueError("job ID does not match any job")
        except Exception as exc:
            event, error = None, exc
        else:
            error = None
        if event is None:      # the log ended (or failed): nothing more for this job
            if error is not None and not user_future.done():
                user_future.set_exception(error)
            self.__running_user_futures.discard(user_future)
            return
        user_future._set_event(event)
        if user_future.done():
            return
        if event.name == "finish":
            user_future.set_result(_exit_code(int(event.context.get("status", 0))))
        elif event.name == "exception" and event.context.get("severity") == 0:
            user_future.set_exception(JobException(event))


class FluxExecutor(concurrent.futures.Executor):
    """Jobs as futures: submit(jobspec) and attach(jobid) return FluxExecutorFutures
    whose result() is the job's exit code.  `handle_args`/`handle_kwargs` open
    each worker's flux.Flux; `poll_interval` is how often a worker takes new
    submissions."""

    EVENTS = MAIN_EVENTS

    def __init__(self, threads: int = 1, thread_name_prefix: str = "",
                 poll_interval: float = 0.1, handle_args=(), handle_kwargs=None):
        if threads < 1:
            raise ValueError("threads must be positive")
        self._submission_queue: collections.deque = collections.deque()
        self._shutdown_lock = threading.Lock()
        self._shutdown_event = threading.Event()
        self._broken_event = threading.Event()
        self._executor_threads = [
            _FluxExecutorThread(self._broken_event, self._shutdown_event,
                                self._submission_queue, poll_interval, tuple(handle_args),
                                dict(handle_kwargs or {}), daemon=True,
                                name=f"{thread_name_prefix or 'FluxExecutor'}-{i}")
            for i in range(threads)]
        for t in self._executor_threads:
            t.start()

    def _check(self) -> None:
        if self._shutdown_event.is_set():
            raise RuntimeError("cannot schedule new futures after shutdown")
        if self._broken_event.is_set():
            raise RuntimeError("Executor is broken, new futures cannot be scheduled")

    def submit(self, *args, **kwargs) -> FluxExecutorFuture:
        """A future for a job: the arguments are flux.job.submit's, less the
        handle (a JobspecV1 first; urgency=, waitable=...)."""
        with self._shutdown_lock:
            self._check()
            fut = FluxExecutorFuture(self._executor_threads[0].ident)
            self._submission_queue.append(_SubmitPackage(args, kwargs, fut))
            return fut

    def attach(self, jobid) -> FluxExecutorFuture:
        """A future for a job submitted elsewhere."""
        with self._shutdown_lock:
            self._check()
            fut = FluxExecutorFuture(self._executor_threads[0].ident)
            fut._set_jobid(jobid)
            self._submission_queue.append(_AttachPackage(jobid, fut))
            return fut

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._shutdown_lock:
            self._shutdown_event.set()
            if cancel_futures:
                while self._submission_queue:
                    package = self._submission_queue.popleft()
                    if package is not None:
                        package.future.cancel()
        if wait:
            for t in self._executor_threads:
                t.join()
