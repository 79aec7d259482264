"""`flux.job.stats`: JobStats, the instance's job counts from job-list.job-stats
(per state, per result; pending, running and active derived), updated at once
(update_sync) or from the reactor (update)."""

from __future__ import annotations

STATES = ("depend", "priority", "sched", "run", "cleanup", "inactive", "total")
RESULTS = ("successful", "failed", "timeout", "canceled", "inactive_purged")


class JobStats:
    """JobStats(handle, queue=None): every count is -1 until the first update."""

    def __init__(self, handle, queue=None):
        self.handle = handle
        self.queues = [] if queue is None else ([queue] if isinstance(queue, str)
                                                else list(queue))
        self.callback, self.cb_kwargs = None, {}
        for name in (*STATES, *RESULTS, "pending", "running", "active"):
            setattr(self, name, -1)

    def _update_cb(self, rpc) -> None:
        resp = rpc.get()
        if self.queues:
            found = {q["name"]: q for q in resp.get("queues", [])}
            missing = [q for q in self.queues if q not in found]
            if missing:
                raise ValueError(f"no stats available for queue {missing[0]}")
            parts = [found[q] for q in self.queues]
        else:
            parts = [resp]
        for name in STATES:
            setattr(self, name, sum(p["job_states"][name] for p in parts))
        for name in RESULTS:
            setattr(self, name, sum(p[name] for p in parts))
        self.pending = self.depend + self.priority + self.sched
        self.running = self.run + self.cleanup
        self.active = self.total - self.inactive - self.inactive_purged
        self.failed += self.timeout + self.canceled    # every unsuccessful job
        if self.callback:
            self.callback(self, **self.cb_kwargs)

    def _query(self):
        return self.handle.rpc("job-list.job-stats", {})

    def update(self, callback=None, **kwargs) -> None:
        """Ask for the counts; the reactor updates them (then calls callback(self,
        **kwargs))."""
        self.callback, self.cb_kwargs = callback, kwargs
        self._query().then(self._update_cb)

    def update_sync(self) -> JobStats:
        self.callback = None
        self._update_cb(self._query())
        return self
