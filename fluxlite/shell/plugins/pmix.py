"""pmix: serve PMIx to the job's tasks (Open MPI programs), as flux-pmix does for Flux.

Options:
    pmi=LIST        simple,pmix offers both (the default for jobs of several
                    tasks where OpenPMIx is installed; plugins/__init__.py says
                    why not for one): MPICH reads PMI_FD, Open MPI the PMIX_*
                    variables, and neither looks at the other's; pmi=pmix
                    offers PMIx alone

Each shell hosts one PMIx server (OpenPMIx's server library, fluxlite/pmi/pmix.py)
for its local tasks: the job is registered as a namespace with its size, the
node and process maps, the local ranks and the hosts, and each task gets the
environment its PMIx client needs.  A fence over the job goes between shells
through the same exchange as PMI-1's barriers (the pmi plugin's): each shell
adds its node's blob, base64 in a key of its own, and hands OpenPMIx every
shell's blob, in shell order, once all arrived.  PMIx_Abort (MPI_Abort) raises
a fatal `exec` exception naming the task, and the job finishes with the abort
code.  A task that exits without PMIx_Finalize while the others use PMIx (one
connected, or a fence is open) ends the job with its status: the others' fence
could never complete.
"""

from __future__ import annotations

import asyncio
import base64
import shutil
import signal
import tempfile

from ...errors import FluxliteError
from ...job import taskmap
from ...job.shell_info import ShellInfo
from ...pmi import pmix, pmix_env
from ...util import fluid, hostlist
from ..plugin import ShellPlugin
from .pmi import PMI

KEY = "pmix.fence."     # + shell rank: a shell's blob in the exchange


def job_hosts(info: ShellInfo) -> list[str]:
    """Each shell's host, in shell order, from R's nodelist (one host per broker
    rank, ranks in order); this shell's own name for every shell when R says less."""
    nodelist = (info.R.get("execution") or {}).get("nodelist") or []
    hosts = [h for entry in nodelist for h in hostlist.decode(entry)]
    if len(hosts) != len(info.ranks):
        return [info.hostname] * info.nshells
    of_rank = dict(zip(sorted(info.ranks), hosts))
    return [of_rank[r] for r in info.ranks]


class PMIx(ShellPlugin):
    name = "pmix"

    def __init__(self, shell):
        super().__init__(shell)
        self.server: pmix.Server | None = None
        self.exchange: PMI | None = None
        self.tmpdir: str | None = None
        self.connected: set[int] = set()
        self.finalized: set[int] = set()
        self.left: list = []            # local tasks gone without PMIx_Finalize
        self.fencing = 0                # fences this shell is in
        self.ending = False
        self._starting: asyncio.Future | None = None

    async def shell_init(self) -> None:
        self.exchange = self.shell.plugin(PMI.name)
        s = self.shell
        self.tmpdir = tempfile.mkdtemp(prefix="pmix.", dir=s.tmpdir)
        self.server = pmix.Server(self._event)
        # OpenPMIx's start blocks for some milliseconds: on a thread, while the shell
        # goes through job-exec's init barrier; the first task.init waits for it
        self._starting = asyncio.ensure_future(asyncio.to_thread(self._start))
        if s.options.get("pmi") is not None:
            await self._started()   # asked for by name: a failure fails the job

    def _start(self) -> None:
        s = self.shell
        self.server.start(self.tmpdir)
        nspace = fluid.f58_plain(s.jobid)
        self.server.register_job(nspace, nspace, s.ntasks, list(s.info.counts), s.rank,
                                 job_hosts(s.info), self.tmpdir, placed=_placed(s))

    async def _started(self) -> None:
        starting, self._starting = self._starting, None
        if starting is None:
            return
        try:
            await starting
        except pmix.PMIxError as exc:
            self._close()
            if self.shell.options.get("pmi") is not None:
                raise
            # offered by default only: MPICH programs still have PMI-1
            self.shell.log(f"pmix: not offered: {exc}", "WARNING")

    async def task_init(self, task) -> None:
        await self._started()
        if self.server is None:
            return
        task.env.update(self.server.client_env(task.rank))
        # set, not defaulted: a job's environment may carry another shell's
        task.env.update(pmix_env.ompi(self.tmpdir))

    def _event(self, ev: pmix.Event) -> None:
        """An event from OpenPMIx's thread, on the shell's loop."""
        if self.server is None:
            return
        if ev.kind == pmix.CONNECTED:
            self.connected.add(ev.rank)
            self._check_left()
        elif ev.kind == pmix.FINALIZED:
            self.finalized.add(ev.rank)
        elif ev.kind == pmix.ABORT:
            self.shell.spawn(self._abort(ev))
        elif ev.kind == pmix.FENCE:
            self.shell.spawn(self._fence(ev))

    async def _fence(self, ev: pmix.Event) -> None:
        self.fencing += 1
        self._check_left()
        keys = {f"{KEY}{self.shell.rank}": base64.b64encode(ev.data).decode()} \
            if ev.data else {}
        try:
            merged = await self.exchange.exchange(keys)
        except FluxliteError as exc:
            if not self.ending:
                self.shell.log(f"pmix: fence failed: {exc.message or exc}", "ERROR")
            ok, data = False, b""
        else:
            ok = True
            blobs = sorted((int(k[len(KEY):]), v) for k, v in merged.items()
                           if k.startswith(KEY) and k[len(KEY):].isdigit())
            data = b"".join(base64.b64decode(v) for _, v in blobs)
        finally:
            self.fencing -= 1
        if self.server is not None:
            self.server.fence_done(ev, ok, data)

    async def _abort(self, ev: pmix.Event) -> None:
        if self.ending:
            if self.server is not None:
                self.server.op_done(ev)
            return
        self.ending = True
        s = self.shell
        message = ev.data.decode(errors="replace").strip()
        if message == "N/A":     # what Open MPI says when MPI_Abort has no message
            message = ""
        note = (f"{s.arg0}: task rank {ev.rank} on host {s.hostname} called PMIx abort "
                f"(exit code {ev.status})" + (f": {message}" if message else ""))
        s.log(note, "FATAL")
        try:
            await s.raise_exception("exec", 0, note, {"rank": ev.rank, "shell_rank": s.rank,
                                                      "host": s.hostname},
                                    wait_status=(ev.status & 0xff) << 8)
        finally:
            if self.server is not None:
                self.server.op_done(ev)

    def task_exit(self, task) -> None:
        if self.server is None or task.rank in self.finalized or self.ending:
            return
        if task.signaled in (signal.SIGTERM, signal.SIGKILL):
            return      # killed: the job is ending (or someone ends it)
        self.left.append(task)
        self._check_left()

    def _check_left(self) -> None:
        """A task left without PMIx_Finalize while the others use PMIx: their fences
        cannot complete without it, so the job ends with its status."""
        if not self.left or self.ending or not (self.connected or self.fencing):
            return
        self.ending = True
        task, s = self.left[0], self.shell
        before = "after PMIx_Init and before PMIx_Finalize" if task.rank in self.connected \
            else "before the PMIx fence the other tasks are in"
        note = (f"{s.arg0}: task rank {task.rank} on host {s.hostname} left "
                f"({task.disposition()}) {before}")
        s.log(note, "FATAL")
        s.spawn(s.raise_exception("exec", 0, note, {"rank": task.rank, "shell_rank": s.rank,
                                                    "host": s.hostname},
                                  wait_status=task.status or 1 << 8))

    def shell_exit(self) -> None:
        self._close()

    def _close(self) -> None:
        if self._starting is not None:
            if not self._starting.done():
                return  # a shell that ends before its server started: the process exits
            if not self._starting.cancelled():
                self._starting.exception()  # seen: it was never needed
        if self.server is not None:
            server, self.server = self.server, None
            server.close()
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None


def _placed(shell) -> tuple[list[int], str] | None:
    """This shell's ranks and every node's, when --taskmap placed them otherwise than
    in blocks (None: blocks, which PMIx's registration works out from the counts)."""
    tm = shell.info.taskmap
    if taskmap.is_block(tm):
        return None
    return list(shell.task_ranks), taskmap.pmix_map(tm, shell.nshells)
