"""pmi: serve the PMI-1 simple wire protocol to the job's tasks (MPI programs).

Options:
    pmi=simple      (default) each task gets a private socketpair and the
                    environment MPICH's simple PMI client reads: PMI_FD,
                    PMI_RANK, PMI_SIZE, PMI_SPAWNED=0
    pmi=off         no PMI: an MPI program starts as a singleton

The protocol and each shell's state are fluxlite/pmi/pmi1.py; this plugin
moves bytes between the tasks' sockets and that state.  Puts stay in the
shell.  When every local task entered a barrier the shell sends its keys to
the leader's `pmi-barrier` method (one message per shell; the leader's own
shell enters in-process); the leader answers every shell once, with the keys
of all, when the last one arrived, and each shell answers its tasks' gets
from those.  A task
that leaves before a barrier, or a lost shell, makes the barrier fail for
everyone (rc=-1) instead of hanging.  `abort` raises a fatal `exec`
exception naming the task, and the job finishes with the abort code.

Before the tasks start, the shell puts PMI_process_mapping (MPICH's node
map, as Flux does), so MPICH finds the tasks that share a node.  The brokers
of a nested instance (`-o instance`, batch and alloc) find each other the
same way (fluxlite/broker/nested.py), so such a job has PMI even with
`-o pmi=off`.
"""

from __future__ import annotations

import asyncio
import signal
import socket

from ...errors import FluxliteError, ProtocolError, UsageError
from ...job import taskmap
from ...pmi import pmi1
from ...protocol.dispatch import NO_REPLY, handler
from ...protocol.schema import Rank, Seq, Struct, Text
from ...util import fluid
from ..plugin import ShellPlugin
from . import pmi_offered


class PMIBarrier(Struct, kw_only=True):
    """A shell's entry into the job's PMI barrier (the `pmi-barrier` method's payload)."""
    shell_rank: Rank
    seq: Seq
    keys: dict[Text, Text] = {}
    error: Text = ""


class PMI(ShellPlugin):
    name = "pmi"

    def __init__(self, shell):
        super().__init__(shell)
        # here only as the exchange between shells with -o pmi=pmix
        self.simple = "simple" in pmi_offered(shell.options, shell.ntasks)
        self._server: pmi1.PMI1Server | None = None
        self._gone_before: list[int] = []   # tasks that ended before any spoke PMI
        self.socks: dict[int, socket.socket] = {}
        self.theirs: list[socket.socket] = []
        self.seq = 0
        self.aborted = False
        self.ending = False       # the job is being ended: closes say nothing new
        self.unfinished: set[int] = set()   # ranks that closed PMI before finalize
        self.ending_elsewhere = False       # the leader said a barrier failed elsewhere
        # leader: the barrier being gathered
        self.arrived: dict[int, dict] = {}
        self.waiting: list = []
        self.gathering_seq = 0
        self.broken = ""          # leader: why no barrier can complete any more

    @property
    def server(self) -> pmi1.PMI1Server:
        """The PMI-1 server of this shell's tasks, made when one first speaks (most
        jobs never do, and the shell would start later for every one of them)."""
        if self._server is None:
            s = self.shell
            self._server = pmi1.PMI1Server(kvsname=fluid.f58_plain(s.jobid), size=s.ntasks,
                                           ranks=list(s.task_ranks))
            self._server.kvs["PMI_process_mapping"] = taskmap.pmi_mapping(s.info.taskmap)
            for rank in self._gone_before:   # closed already; a barrier must not wait for it
                self._server.task_gone(rank, "")
        return self._server

    # ----------------------------------------------------------- per task
    def task_init(self, task) -> None:
        if not self.simple:
            return      # here only as the exchange between shells (-o pmi=pmix)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        ours.setblocking(False)
        task.pass_fds = tuple(task.pass_fds) + (theirs.fileno(),)
        task.env.update({"PMI_FD": str(theirs.fileno()), "PMI_RANK": str(task.rank),
                         "PMI_SIZE": str(self.shell.ntasks), "PMI_SPAWNED": "0"})
        self.socks[task.rank] = ours
        self.theirs.append(theirs)
        asyncio.get_running_loop().add_reader(ours.fileno(), self._readable, task.rank)

    def shell_start(self) -> None:
        self._close_theirs()

    def task_exit(self, task) -> None:
        # the task's end is closed with it; anything it left unread is moot
        if task.rank in self.socks:
            if self._server is None:
                self._gone_unheard(task.rank)
            else:
                self._apply(self.server.task_gone(task.rank, ""))
        # one line for a task that left PMI unfinished on its own (not one killed
        # because the job is ending)
        if task.rank in self.unfinished and not task.signaled and not self.ending:
            self.shell.log(f"pmi: task rank {task.rank} exited ({task.disposition()}) "
                           "after PMI init and before finalize", "ERROR")

    def _close_theirs(self) -> None:
        for sock in self.theirs:
            sock.close()    # the tasks have their own copies
        self.theirs.clear()

    def _readable(self, rank: int) -> None:
        sock = self.socks.get(rank)
        if sock is None:
            return
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data and self._server is None:
            self._gone_unheard(rank)
        else:
            self._apply(self.server.feed(rank, data))

    def _gone_unheard(self, rank: int) -> None:
        """A task's PMI connection ended (it exited, or closed it) before any task here
        spoke PMI: no server to tell yet, and no barrier to fail; the server, if one is
        made later, learns it is gone (and does not wait for it)."""
        self._close(rank)
        self._gone_before.append(rank)

    def _apply(self, effects: list) -> None:
        for e in effects:
            if isinstance(e, pmi1.Answer):
                self._send(e.rank, e.data)
            elif isinstance(e, pmi1.Close):
                if e.eof and e.why:
                    self.unfinished.add(e.rank)
                elif e.why:
                    self.shell.log(f"pmi: task rank {e.rank}: {e.why}", "ERROR")
                self._close(e.rank)
            elif isinstance(e, pmi1.Log):
                self.shell.log(f"pmi: task rank {e.rank}: {e.why}", "ERROR")
            elif isinstance(e, pmi1.Barrier):
                if e.error:
                    self._left_early(e)
                self.shell.spawn(self._barrier(e.keys, e.error))
            elif isinstance(e, pmi1.Abort):
                self._abort(e)

    def _send(self, rank: int, data: bytes) -> None:
        sock = self.socks.get(rank)
        if sock is None:
            return
        try:
            # answers are short; a task that stops reading must not stall the shell
            sent = sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError:     # the task is gone; its exit says the rest
            self._apply(self.server.task_gone(rank, ""))
            return
        if sent != len(data):
            self._apply(self.server.task_gone(rank, "does not read its PMI answers"))

    def _close(self, rank: int) -> None:
        sock = self.socks.pop(rank, None)
        if sock is not None:
            asyncio.get_running_loop().remove_reader(sock.fileno())
            sock.close()

    def _abort(self, e: pmi1.Abort) -> None:
        if self.aborted:
            return
        self.aborted = True
        self.ending = True
        code = e.code & 0xff
        note = (f"{self.shell.arg0}: task rank {e.rank} on host {self.shell.hostname} "
                f"called PMI abort (exit code {e.code})" + (f": {e.message}" if e.message else ""))
        self.shell.log(note, "FATAL")
        self.shell.spawn(self.shell.raise_exception(
            "exec", 0, note, {"rank": e.rank, "shell_rank": self.shell.rank,
                              "host": self.shell.hostname}, wait_status=code << 8))

    def _left_early(self, e: pmi1.Barrier) -> None:
        """A task left before a barrier the others are in: MPI cannot recover from
        that (the others may wait on it outside PMI too), so the job is ended."""
        if self.ending:
            return
        self.ending = True
        self.shell.spawn(self._raise_left_early(e.gone_rank))

    async def _raise_left_early(self, rank: int | None) -> None:
        task = next((t for t in self.shell.tasks if t.rank == rank), None)
        if task is not None and not task.done.done():
            # its socket closed as it exited: the status follows at once (bounded, as
            # a task may close the socket and go on running)
            try:
                await asyncio.wait_for(asyncio.shield(task.done), 2.0)
            except TimeoutError:
                pass
        known = task is not None and task.status is not None
        if self.ending_elsewhere or (known and task.signaled in (signal.SIGTERM, signal.SIGKILL)):
            return      # killed because the job is ending (or by someone who ends it)
        how = f" ({task.disposition()})" if known else ""
        note = (f"{self.shell.arg0}: task rank {rank} on host {self.shell.hostname} "
                f"left{how} before the PMI barrier the other tasks are in")
        self.shell.log(note, "FATAL")
        await self.shell.raise_exception(
            "exec", 0, note, {"rank": rank, "shell_rank": self.shell.rank,
                              "host": self.shell.hostname},
            wait_status=task.status if known and task.status else 1 << 8)

    async def exchange(self, keys: dict, error: str = "") -> dict:
        """Enter the job's exchange between shells with this shell's `keys` and return
        every shell's, merged; raises FluxliteError when it failed.  PMI-1 barriers and
        PMIx fences (the pmix plugin) both go through it."""
        self.seq += 1
        req = PMIBarrier(shell_rank=self.shell.rank, seq=self.seq, keys=keys, error=error)
        try:
            if self.shell.is_leader:
                # the leader's own entry: no round trip through its broker
                waiter = asyncio.get_running_loop().create_future()
                self._arrive(req, waiter)
                resp = await waiter
            else:
                payload = {"shell_rank": req.shell_rank, "seq": req.seq, "keys": keys}
                if error:
                    payload["error"] = error
                resp = await self.shell.call_leader("pmi-barrier", payload)
        except FluxliteError as exc:
            if not error and not self.shell.is_leader:
                # the leader may never have taken this entry (a refused request): it
                # is told, so that no other shell's tasks wait on this one
                self.shell.send_leader("pmi-barrier", {
                    "shell_rank": req.shell_rank, "seq": req.seq, "keys": {},
                    "error": f"shell rank {req.shell_rank} could not enter the barrier: "
                             f"{exc.message or exc}"})
            raise
        return dict(resp.get("keys") or {})

    async def _barrier(self, keys: dict, error: str = "") -> None:
        try:
            merged = await self.exchange(keys, error)
        except FluxliteError as exc:
            if error:
                return          # our own failure: the local tasks were told already
            self.ending_elsewhere = True
            self._apply(self.server.barrier_failed(exc.message or str(exc)))
            return
        self._apply(self.server.barrier_done(merged))

    # ----------------------------------------------------------- leader
    @handler("pmi-barrier", schema=PMIBarrier, max_payload=16 << 20)
    def _m_barrier(self, msg, req: PMIBarrier):
        self._arrive(req, msg)
        return NO_REPLY

    def _arrive(self, req: PMIBarrier, waiter) -> None:
        """A shell entered the barrier; `waiter` is its request (or, for the leader's
        own shell, a future).  When the last shell arrived, each gets the merged keys
        once.  Raises FluxliteError when this barrier cannot be entered."""
        if req.shell_rank >= self.shell.nshells:
            raise UsageError(f"PMI barrier from shell rank {req.shell_rank}: the job has "
                             f"{self.shell.nshells} shell(s)")
        if req.error and not self.broken:
            self._break(f"PMI barrier failed on shell rank {req.shell_rank}: {req.error}")
        if self.broken:
            raise ProtocolError(self.broken)
        if req.seq != self.gathering_seq:
            if req.seq != self.gathering_seq + 1 or self.arrived:
                raise ProtocolError(f"PMI barrier {req.seq} from shell {req.shell_rank} "
                                    f"while gathering barrier {self.gathering_seq}")
            self.gathering_seq = req.seq
        self.arrived[req.shell_rank] = dict(req.keys)
        self.waiting.append(waiter)
        if len(self.arrived) < self.shell.nshells:
            return
        merged: dict = {}
        for rank in sorted(self.arrived):
            merged.update(self.arrived[rank])
        waiting, self.waiting = self.waiting, []
        self.arrived = {}
        for w in waiting:
            self._answer(w, {"keys": merged})

    def _answer(self, waiter, resp: dict | None, errnum: int = 0, errstr: str = "") -> None:
        if isinstance(waiter, asyncio.Future):
            if waiter.done():
                return
            if errnum:
                waiter.set_exception(FluxliteError(errstr, errnum))
            else:
                waiter.set_result(resp)
        elif errnum:
            self.shell.respond_exception(waiter, FluxliteError(errstr, errnum))
        else:
            self.shell.respond(waiter, resp)

    def shell_lost(self, shell_rank: int, severity: int, message: str) -> None:
        """A shell is gone: no barrier can complete; release those waiting."""
        if not self.broken:
            self._break(f"PMI barrier failed: shell rank {shell_rank} was lost")

    def _break(self, why: str) -> None:
        self.broken = why
        waiting, self.waiting = self.waiting, []
        self.arrived = {}
        for w in waiting:
            self._answer(w, None, 71, self.broken)

    def shell_exit(self) -> None:
        self._close_theirs()
        for rank in list(self.socks):
            self._close(rank)
