"""`flux.job.JournalConsumer` and `flux.job.JournalEvent`, thin over
fluxlite.job.journal.Journal (the job-manager.events-journal stream)."""

from __future__ import annotations

from fluxlite.errors import RPCTimeout
from fluxlite.job import journal as _journal

from .. import _handle, missing
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
        return f"{self.jobid.f58}: {self.timestamp:<0.5f} {self.name} " \
               f"{self.context_string}".rstrip()


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

    def start(self) -> "JournalConsumer":
        self._j = _journal.Journal(_handle(self.handle), self.full, self.since,
                                   self.include_sentinel).start()
        return self

    def poll(self, timeout: float = -1.0):
        if self._j is None:
            raise RuntimeError("poll() called before start()")
        try:
            e = self._j.poll(None if timeout is None or timeout < 0 else timeout)
        except RPCTimeout as exc:
            raise TimeoutError(exc.message) from None
        if e is None:
            return None
        if e is _journal.SENTINEL:
            return SENTINEL_EVENT
        return JournalEvent(e["id"], {k: e[k] for k in ("name", "timestamp", "context")},
                            e.get("jobspec"), e.get("R"))

    def stop(self) -> None:
        if self._j is not None:
            self._j.stop()

    def __getattr__(self, name):
        raise missing("flux.job.JournalConsumer", name)
