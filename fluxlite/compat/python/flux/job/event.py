"""`flux.job.event`: job eventlog entries (EventLogEvent, a dict as Flux's is),
JobException, and watching a job's eventlog: event_watch_async returns a
JobEventWatchFuture fed by fluxlite's one eventlog follower (jobapi.api.Follower)
on the handle's reactor; get_event() is the next entry, None once the log can
grow no more."""

from __future__ import annotations

import errno
import json

from fluxlite.errors import EndOfStream
from fluxlite.jobapi import api

from ..future import Future, FutureState

MAIN_EVENTS = frozenset({"submit", "validate", "depend", "priority", "urgency", "alloc",
                         "free", "start", "release", "finish", "clean", "exception",
                         "memo", "flux-restart", "debug"})


class EventLogEvent(dict):
    """One eventlog entry, a dict ({"name", "timestamp", "context"}) with `.name`,
    `.timestamp`, `.context` and `.context_string`.  Made from a dict or its JSON."""

    def __init__(self, event, ts: float = -1.0, context=None):
        if isinstance(event, (str, bytes)):
            try:
                event = json.loads(event)
            except ValueError:
                event = {"name": event if isinstance(event, str) else event.decode(),
                         "timestamp": ts, "context": context or {}}
        super().__init__(event)
        self.setdefault("context", {})

    name = property(lambda self: self.get("name"))
    timestamp = property(lambda self: self.get("timestamp", 0.0))
    context = property(lambda self: self["context"] or {})

    @property
    def context_string(self) -> str:
        return json.dumps(self.context, separators=(",", ":")) if self.context else ""

    def __str__(self) -> str:
        return f"{self.timestamp:<0.5f}: {self.name} {self.context_string}".rstrip()


class JobException(Exception):
    """A job exception event (`.timestamp`, `.type`, `.note`, `.severity`); str() is
    Flux's `job.exception: type=TYPE: NOTE`."""

    def __init__(self, event: EventLogEvent):
        self.timestamp = event.timestamp
        self.type = event.context.get("type", "")
        self.note = event.context.get("note", "")
        self.severity = event.context.get("severity", 0)
        super().__init__()

    def __str__(self) -> str:
        return f"job.exception: type={self.type}: {self.note}"


class JobEventWatchFuture(Future):
    """The entries of a job's eventlog as they are appended: get_event() is the
    next (resetting the future unless autoreset=False), None at the end."""

    def __init__(self, flux_handle, jobid: int, eventlog: str = "eventlog"):
        state = FutureState(flux_handle)
        state.streaming = state.reactor_only = True
        super().__init__(state)
        h = flux_handle.handle
        api.info(h, jobid)   # an unknown id fails now (ENOENT), as in Flux
        self._follower = api.Follower(
            h, jobid, "eventlog" if eventlog == "main" else eventlog,
            on_entry=lambda e: state.fulfill(EventLogEvent(e)), on_done=self._done)
        self._follower.start()

    def _done(self) -> None:
        f = self._follower
        if f.error is not None:
            self.pimpl.fulfill_error(f.error.errnum, f.error.message)
        elif f.missing:
            self.pimpl.fulfill_error(errno.ENOENT, "the job ended without writing "
                                     f"its {f.path} eventlog")
        else:
            self.pimpl.fulfill_error(errno.ENODATA, "end of eventlog")
        self.pimpl.ended = True

    def get_event(self, autoreset: bool = True):
        try:
            event = self._result()
        except EndOfStream:
            return None
        if autoreset:
            self.reset()
        return event

    get = get_event

    def cancel(self, stop: bool = False) -> None:
        """Stop watching: the future then ends (get_event() gives None).  With
        stop=True its then-callback is not called again, not even for the end."""
        self._follower.close()
        if stop:
            self.pimpl.then = None
            flux_handle = self.pimpl.flux
            if flux_handle is not None:
                flux_handle._futures.discard(self.pimpl)
        if not self.pimpl.ended:
            self._done()


def event_watch_async(flux_handle, jobid, eventlog: str = "eventlog") -> JobEventWatchFuture:
    from . import _flux
    return JobEventWatchFuture(_flux(flux_handle), int(jobid), eventlog)


def event_watch(flux_handle, jobid, eventlog: str = "eventlog"):
    """Yield each EventLogEvent of a job's eventlog as it is logged, until it ends."""
    watcher = event_watch_async(flux_handle, jobid, eventlog)
    try:
        event = watcher.get_event()
        while event is not None:
            yield event
            event = watcher.get_event()
    finally:
        watcher._follower.close()


def event_wait(flux_handle, jobid, name: str, eventlog: str = "eventlog",
               raiseJobException: bool = True) -> EventLogEvent:
    """The first `name` entry of the log; a fatal job exception before it raises
    JobException (with raiseJobException); a log that ends without it,
    OSError(ENODATA)."""
    for e in event_watch(flux_handle, jobid, eventlog):
        if e.name == name:
            return e
        if raiseJobException and e.name == "exception" and e.context.get("severity") == 0:
            raise JobException(e)
    raise EndOfStream(f"eventlog ended before event='{name}'")
