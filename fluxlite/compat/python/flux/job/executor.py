"""`flux.job.executor`: FluxExecutor and FluxExecutorFuture over fluxlite's
Executor (fluxlite.job.executor), with Flux's semantics where fluxlite's own
differ: cancel() cancels only a future whose job is not submitted yet (a
running job's future answers False, as any running concurrent.futures
future); event callbacks get EventLogEvent dicts; a job ended by a fatal
exception raises flux.job.JobException (`job.exception: type=cancel: ...`)."""

from __future__ import annotations

import concurrent.futures

from fluxlite.errors import JobException as _FluxliteJobException
from fluxlite.job.executor import Executor, JobFuture

from .event import EventLogEvent, JobException

__all__ = ["FluxExecutor", "FluxExecutorFuture"]


class FluxExecutorFuture(JobFuture):
    def cancel(self) -> bool:
        if self.cancelled():
            return True
        if not concurrent.futures.Future.cancel(self):
            return False
        self._set_jobid(None, concurrent.futures.CancelledError())
        return True

    def _set_event(self, e) -> None:
        if not isinstance(e, EventLogEvent):
            e = EventLogEvent({"name": e.name, "timestamp": e.timestamp,
                               "context": e.context})
        super()._set_event(e)

    def set_exception(self, exception) -> None:
        if isinstance(exception, _FluxliteJobException):
            event = max(self._events.get("exception", ()), default=None,
                        key=lambda e: e.timestamp)
            exception = JobException(event if event is not None else EventLogEvent(
                {"name": "exception", "timestamp": 0.0,
                 "context": {"type": exception.etype, "note": exception.note,
                             "severity": exception.severity}}))
        super().set_exception(exception)


class FluxExecutor(Executor):
    """fluxlite's Executor with Flux's constructor: the handle's URL is
    `handle_args[0]` or `handle_kwargs["url"]` (default $FLUXLITE_URI).  A future's
    result() is the job's exit code (-signal if killed), as Flux's."""

    future_class = FluxExecutorFuture
    EVENTS = JobFuture.EVENTS

    def __init__(self, threads: int = 1, thread_name_prefix: str = "",
                 poll_interval: float = 0.1, handle_args=(), handle_kwargs=None):
        kwargs = dict(handle_kwargs or {})
        url = handle_args[0] if handle_args else kwargs.pop("url", None)
        if kwargs or len(handle_args) > 1:
            raise NotImplementedError("flux.job.FluxExecutor: handle arguments other "
                                      "than the URL are not in fluxlite")
        if isinstance(url, bytes):
            url = url.decode()
        super().__init__(url)
