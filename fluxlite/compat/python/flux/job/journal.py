"""`flux.job.JournalConsumer` and `flux.job.JournalEvent`, thin over
fluxlite.jobapi.journal.Journal (the job-manager.events-journal stream)."""

from __future__ import annotations

from fluxlite.errors import RPCTimeout
from fluxlite.jobapi import journal as _journal

from .. import Flux, _handle, missing
from ..future import Future, FutureState
from . import EventLogEvent, JobID


class JournalEvent(EventLogEvent):
    """One journal event: `.jobid` (JobID), `.name`, `.timestamp`, `.context`,
    `.context_string`, `.jobspec` (submit events, without its environment) and
    `.R` (alloc events).  The sentinel is the empty event (jobid -1)."""

    def __init__(self, jobid, event: dict, jobspec=None, R=None):
        super().__init__(event)
        self.jobid = JobID(jobid) if jobid != -1 else -1
        self.jobspec, self.R = jobspec, R

    def is_empty(self) -> bool:
        return self.jobid == -1

    def __str__(self) -> str:
        if self.is_empty():
            return "-1: End of historical data stream"
        parts = [f"{self.jobid.f58}:", f"{self.timestamp:<0.5f}", self.name,
                 self.context_string, self.jobspec and f"jobspec={self.jobspec}",
                 self.R and f"R={self.R}"]
        return " ".join(p for p in parts if p)


SENTINEL_EVENT = JournalEvent(-1, {})


class JournalConsumer:
    """Flux's JournalConsumer: start(), poll(timeout=-1.0) (the next JournalEvent,
    SENTINEL_EVENT after the history with include_sentinel, None once stopped;
    TimeoutError if none came in time), stop()."""

    SENTINEL_EVENT = SENTINEL_EVENT

    def __init__(self, flux_handle, full: bool = True, since: float = 0.0,
                 include_sentinel: bool = False):
        self.handle = flux_handle
        self.full, self.since, self.include_sentinel = full, since, include_sentinel
        self._j = None
        self._cb = None    # (callback, args, kwargs) of set_callback

    def start(self) -> JournalConsumer:
        self._j = _journal.Journal(_handle(self.handle), self.full, self.since,
                                   self.include_sentinel).start()
        if self._cb is not None:
            self._follow()
        return self

    def set_callback(self, event_cb, *args, **kwargs) -> JournalConsumer:
        """Call event_cb(event, *args, **kwargs) for each event from the handle's
        reactor (Flux.reactor_run) instead of poll().  Once the journal ends (after
        stop()) the reactor has nothing more to run for it; as Flux's, the callback
        is not called then.  May come before start(), or replace an earlier one."""
        first = self._cb is None
        self._cb = (event_cb, args, kwargs)
        if first and self._j is not None:
            self._follow()
        return self

    def _follow(self) -> None:
        """Journal events go to a future whose then-callback, run by the reactor
        only, hands each to the user's callback."""
        fh = self.handle if isinstance(self.handle, Flux) else Flux(handle=_handle(
            self.handle))
        state = FutureState(fh)
        state.streaming = state.reactor_only = True

        def deliver(future):
            while state.results:
                e = state.results.pop(0)[0]
                if e is None:          # the end: the reactor has nothing more to run
                    state.ended = True  # for it, and, as in Flux, no callback is made
                    fh._futures.discard(state)
                    return
                event_cb, args, kwargs = self._cb
                event_cb(self._event(e), *args, **kwargs)

        Future(state).then(deliver)
        self._j.set_callback(state.fulfill)

    def _event(self, e):
        if e is None:
            return None
        if e is _journal.SENTINEL:
            return SENTINEL_EVENT
        return JournalEvent(e["id"], {k: e[k] for k in ("name", "timestamp", "context")},
                            e.get("jobspec"), e.get("R"))

    def poll(self, timeout: float = -1.0):
        if self._j is None:
            raise RuntimeError("poll() called before start()")
        try:
            e = self._j.poll(None if timeout is None or timeout < 0 else timeout)
        except RPCTimeout as exc:
            raise TimeoutError(exc.message) from None
        return self._event(e)

    def stop(self) -> None:
        if self._j is not None:
            self._j.stop()

    def __getattr__(self, name):
        raise missing("flux.job.JournalConsumer", name)
