"""The `job-manager` service (rank 0): accepts jobs and drives them to INACTIVE.

Every state change is an entry appended to the job's main eventlog, in the
order RFC 21 gives: submit, validate, depend, priority, alloc, start,
exception, finish, release, free, clean.  What each event leads to is decided
by the per-job state machine in job/actions.py (pure: events in, effects out);
this service owns the job table and the I/O, one concern a module, as
flux-core's job-manager/ is:

    table.py         the job table and the driver of the machine (`_handle`)
    effects.py       each effect's interpreter (KVS, sched, job-exec, waiters...)
    submit.py        job-manager.submit / job-ingest.submit
    dependencies.py  dependency verdicts, singletons
    control.py       urgency, raise, cancel, raiseall, kill, memo
    wait.py          job-manager.wait
    listing.py       list, info, stats, and Flux's job-list service
    journal.py       job-manager.events-journal
    queue.py         queue start/stop/enable/disable, drain, idle, the checkpoint
    jobtap.py        the built-in jobtap plugins: list, load, remove, query
    purge.py         inactive jobs forgotten

Each is a part of the one service class below (the parts share the table);
this module holds its state and its lifecycle.  With a state directory
(-Sstatedir), the table is rebuilt at start from the jobs' eventlogs
(jm_restart.py), and a shutdown cancels only running jobs.
"""

from __future__ import annotations

import asyncio
import collections
import json

from ...job import actions as act
from ...job import policy as jpolicy
from ...job import states
from ...job.actions import Job
from ...util import fluid
from .. import jm_restart
from ..base import Service
from ..kvs_direct import KVSDirect
from .control import Control
from .dependencies import Dependencies
from .effects import Effects
from .jobtap import BUILTIN_PLUGINS, Jobtap
from .journal import Journal
from .listing import Listing
from .purge import Purge
from .queue import Queues, QueueState
from .submit import Submit
from .table import JobTable
from .wait import Waits


class JobManagerService(JobTable, Effects, Submit, Dependencies, Control, Waits, Listing,
                        Journal, Queues, Jobtap, Purge, Service):
    name = "job-manager"
    busy = "it holds the instance's jobs; it stops only with the instance"
    aliases = ("job-list", "job-ingest")   # Flux's job-list and job-ingest topics

    def __init__(self, ctx, *, kvs: KVSDirect):
        super().__init__(ctx)
        self.jobs: dict[int, Job] = {}
        self._last_stamp = 0.0   # the latest eventlog entry's timestamp (_stamp)
        # active jobs with an explicit name, for singleton dependencies: job id ->
        # (userid, name), the count of each, and the singletons waiting, in submit order
        self._named: dict[int, tuple[int, str]] = {}
        self._named_active: dict[tuple[int, str], int] = {}
        self._singletons: dict[tuple[int, str], collections.deque] = {}
        self.any_waiters: list = []   # job-manager.wait without an id, in arrival order
        self.gen = fluid.FluidGenerator(0)
        self.kvs = kvs   # jobspecs, eventlogs, the checkpoint (kvs_direct.py)
        self.level = int(ctx.attrs.get("instance-level") or 0)
        self.actions = act.Actions(ctx.hosts)   # the per-job machine (and the queue)
        self._idle = asyncio.Event()
        self._idle.set()
        queues = json.loads(ctx.attrs.get("queues") or "{}")
        self.policy = jpolicy.Policy(queues, json.loads(ctx.attrs.get("policy") or "{}"))
        # each queue's state by name ("" is the one anonymous queue when none is named)
        self.queues: dict[str, QueueState] = {q: QueueState() for q in self.policy.names}
        self._nocheckpoint: set[str] = set()   # stopped with --nocheckpoint
        self.n_active = 0        # jobs not INACTIVE
        self.n_running = 0       # jobs in RUN or CLEANUP (what `queue idle` waits out)
        self.drain_waiters: list = []
        self.inactive_purged = 0  # inactive jobs forgotten (purge counts them here)
        self.idle_waiters: list = []
        self.inactive: dict[int, Job] = {}  # inactive jobs, oldest first (purge order)
        self._purge_timer = None
        self.journal: list = []  # job-manager.events-journal streams
        self._untrimmed = 0       # jobs purged since the heap was last trimmed
        self.max_purged = 0       # the largest id of a purged job (ids are never reused)
        self.jobtap_plugins: list[str] = list(BUILTIN_PLUGINS)   # jobtap.py
        self._calm = asyncio.Event()   # set while no job is in RUN or CLEANUP
        self._calm.set()

    async def start(self) -> None:
        """With a state directory, rebuild the table the last run left; the jobs
        are looked at again once every service of the rank is up."""
        if self.kvs.durable:
            jm_restart.rebuild(self)
            if self.n_running:
                self._calm.clear()
            asyncio.get_running_loop().call_soon(jm_restart.resume, self)

    # ------------------------------------------------------------ cleanup
    async def cleanup(self) -> None:
        """Instance shutdown: cancel every job and wait for them to end.  With a state
        directory, as Flux's: only running jobs are canceled, and pending ones wait for
        the next start (the queue is stopped meanwhile, not as a restart will see it)."""
        if self.kvs.durable:
            self.actions.started = False
            for job in [j for j in self.jobs.values() if j.state == states.SCHED and j.sched_req]:
                self._handle(job, act.QueueChanged())
            for job in [j for j in self.jobs.values() if j.state == states.RUN]:
                if job.fatal is None:
                    self.raise_exception(job, "cancel", 0, "instance shutting down")
            await self._calm.wait()
        else:
            for job in list(self.jobs.values()):
                if job.state not in (states.INACTIVE, states.CLEANUP) and job.fatal is None:
                    self.raise_exception(job, "cancel", 0, "instance shutting down")
            await self._idle.wait()
        for w in self.journal:
            self.untrack_stream(w)
            self.end_stream(w)
        self.journal.clear()


