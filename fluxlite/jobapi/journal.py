"""The job journal: the main eventlog entries of every job one may see, as one stream.

    from fluxlite.jobapi.journal import Journal, SENTINEL
    j = Journal(h, include_sentinel=True).start()
    while (e := j.poll(timeout=10)) is not None:
        if e is SENTINEL: print("-- now live --"); continue
        print(fluid.f58(e["id"]), e["name"], e["context"])

It is the job-manager's `job-manager.events-journal` stream (the instance owner
sees every job, another user only their own).  With `full`, the journal begins
with the history of every job the instance still knows (not purged), else with
the active jobs'; the history is returned in timestamp order, then (with
`include_sentinel`) SENTINEL, then each entry as it is logged.  An event is a
dict: `id`, `name`, `timestamp`, `context`, and `jobspec` (without its
environment) with a submit event, `R` with an alloc event.  Events not newer
than `since` are skipped.  `stop()` ends the stream: poll() then returns what
is left, and None.
"""

from __future__ import annotations

import collections
import time

from ..errors import EndOfStream, RPCTimeout, UsageError

TOPIC = "job-manager.events-journal"
SENTINEL = {"id": -1, "name": None, "timestamp": 0.0, "context": {}}


def journal_request(full: bool = True) -> tuple[str, dict]:
    return TOPIC, {"full": bool(full)}


def events(resp: dict) -> list[dict]:
    """The events of one journal response, flattened (with jobspec/R where given)."""
    out = []
    for job in resp["jobs"]:
        for e in job["events"]:
            ev = {"id": job["id"], "name": e.get("name"), "timestamp": e.get("timestamp", 0.0),
                  "context": e.get("context") or {}}
            if e.get("name") == "submit" and "jobspec" in job:
                ev["jobspec"] = job["jobspec"]
            if e.get("name") == "alloc" and "R" in job:
                ev["R"] = job["R"]
            out.append(ev)
    return out


class Journal:
    """A journal consumer on a blocking Handle (see the module's doc)."""

    def __init__(self, h, full: bool = True, since: float = 0.0,
                 include_sentinel: bool = False):
        self.h, self.full, self.since = h, full, since
        self.include_sentinel = include_sentinel
        self._p = None
        self._queue: collections.deque = collections.deque()
        self._history: list[dict] | None = None   # history being gathered
        self._ended = False
        self._on_event = None
        self._told_end = False

    def start(self) -> Journal:
        if self._p is not None:
            raise UsageError("journal: start() called twice")
        self._history = []
        self._p = self.h.rpc(*journal_request(self.full), streaming=True)
        return self

    def _take(self) -> None:
        """Move the responses that arrived into the queue (history sorted first)."""
        while self._p.ready():
            try:
                resp = self._p.take()
            except EndOfStream:
                resp = None
            self._absorb(resp)
            if self._ended:
                return

    def _absorb(self, resp: dict | None) -> None:
        """One response (None: the end of the stream) into the queue."""
        if resp is None:
            self._ended = True
            if self._history is not None:  # stopped before the history ended
                self._flush_history(False)
            return
        evs = [e for e in events(resp) if e["timestamp"] > self.since]
        if self._history is None:
            self._queue.extend(evs)
        elif resp["jobs"]:
            self._history.extend(evs)
        else:
            self._flush_history(self.include_sentinel)

    def set_callback(self, on_event) -> None:
        """Deliver the events to `on_event(e)` as they arrive, from the handle's
        dispatch (the caller drives the handle), instead of poll(): the queued ones
        at once, then each as it comes; `on_event(None)` once the stream ends."""
        self._on_event = on_event
        self._deliver()
        self._p.on_response = self._on_response

    def _on_response(self, msg) -> None:
        self._absorb(None if msg.errnum else msg.payload)   # an error, or the clean end
        self._deliver()

    def _deliver(self) -> None:
        self._take()
        while self._queue:
            self._on_event(self._queue.popleft())
        if self._ended and not self._told_end:
            self._told_end = True
            self._on_event(None)

    def _flush_history(self, sentinel: bool) -> None:
        self._history.sort(key=lambda e: e["timestamp"])
        self._queue.extend(self._history)
        if sentinel:
            self._queue.append(SENTINEL)
        self._history = None

    def poll(self, timeout: float | None = None):
        """The next event (SENTINEL after the history, if asked for); None once the
        stream has ended.  RPCTimeout if nothing came within `timeout` seconds."""
        if self._p is None:
            raise UsageError("journal: poll() called before start()")
        deadline = None if timeout is None else time.monotonic() + timeout
        self._take()
        while not self._queue and not self._ended:
            left = None if deadline is None else deadline - time.monotonic()
            if not self.h.run_until(self._p.ready, left):
                raise RPCTimeout(f"{TOPIC}: no event within {timeout:g}s")
            self._take()
        return self._queue.popleft() if self._queue else None

    def stop(self) -> None:
        """End the stream (the events already sent are still polled, then None)."""
        if self._p is not None and not self._p.done and not self._ended:
            self.h.send(f"{TOPIC}-cancel", {"matchtag": self._p.matchtag})
