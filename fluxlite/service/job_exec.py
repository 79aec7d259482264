"""The `job-exec` service (rank 0): runs jobs by starting a job shell on every rank.

For each job it asks `rexec` on every allocated rank to start one shell
(its ShellInfo, fluxlite/job/shell_info.py, is built here, one per shell),
holds the shells' init and start barriers, writes the exec eventlog (init,
starting, shell.init, shell.start, shell-exit, complete, done), and reports
start / exception / finish / release back to the job-manager.

Killing: a fatal exception sends SIGTERM to the shells (SIGALRM for a time
limit), which forward it to their tasks; after `exec.kill-timeout` the shells'
whole process trees get SIGKILL.

Critical ranks: every running job has a set of critical shell ranks (all of
them until `job-exec.critical-ranks` replaces it).  Every change is pushed, in
order and with a sequence number, to the job's leader shell; a change made
before the shells are up reaches them with the init barrier's answer.

A lost shell (its rank's broker is gone, or the shell died of a signal) on a
critical rank is a fatal `node-failure`; on any other rank a non-fatal one
(severity 2).  Either way the leader shell is told (`lost-shell`), so nothing
waits for it.  The leader shell exiting normally while others still run
starts `exec.shell-exit-timeout`; when it expires the job fails, naming them.

Those rules live in one pure state machine per job, fluxlite/job/execution.py:
this service turns what happens (rexec answers, barrier requests, timers, RPCs)
into its events and carries out the effects it returns, in one place (_apply).
"""

from __future__ import annotations

import asyncio
import time

from ..errors import (
    Canceled,
    EndOfStream,
    HostUnreachable,
    InvalidValue,
    NotFound,
    TryAgain,
    UsageError,
)
from ..job import execution as ex
from ..job import rset, taskmap
from ..job import schema as jschema
from ..job.eventlog import entry, eventlog_key
from ..job.shell_info import CriticalRanks, ShellInfo
from ..protocol.schema import (
    CARRY_PAYLOAD,
    AnyMap,
    Idset,
    JobId,
    JobRequest,
    KillRequest,
    Name,
    Pid,
    Severity,
    Struct,
    Text,
    WaitStatus,
)
from ..util import fluid, fsd, idset
from ..util.log import enabled as log_enabled
from .base import ANY, Service, handler
from .kvs_direct import KVSDirect


class StartRequest(Struct, kw_only=True):
    id: JobId
    userid: int
    jobspec: AnyMap
    R: AnyMap
    request: jschema.Request   # the job's resource request, as the job-manager computed it


class BarrierRequest(Struct, kw_only=True):
    id: JobId
    shell_rank: int
    error: Text | None = None
    pids: list[Pid] | None = None      # start barrier: the shell's tasks, in task order


class ExceptionRequest(Struct, kw_only=True):
    id: JobId
    type: Name
    severity: Severity
    note: Text = ""
    wait_status: WaitStatus | None = None


class CriticalRanksRequest(Struct, kw_only=True):
    id: JobId
    ranks: Idset



class ExecJob:
    """What job-exec keeps for one job: its I/O handles beside its Execution."""

    def __init__(self, msg, jobid: int, userid: int, jobspec: dict, R: dict,
                 request: jschema.Request, hosts: tuple[str, ...], attrs: dict):
        self.msg = msg                 # the job-manager's job-exec.start stream
        self.id = jobid
        self.userid = userid
        self.jobspec = jobspec
        self.R = R
        self.alloc = rset.parse(R)
        self.gpus = rset.parse(R, "gpu")
        self.ranks = sorted(self.alloc)
        self.counts = rset.layout(request, self.alloc)
        options = (jobspec.get("attributes", {}).get("system", {}).get("shell") or {}) \
            .get("options") or {}
        try:
            self.taskmap = taskmap.build(self.counts, options.get("taskmap"),
                                         [hosts[r] for r in self.ranks])
        except ValueError as exc:
            raise InvalidValue(str(exc)) from None
        if (options.get("taskmap") or {}).get("scheme") == "hostfile":   # may move tasks
            self.counts = taskmap.counts_of(self.taskmap, len(self.counts))
        self.service = f"{userid}-shell-{fluid.f58_plain(jobid)}"
        self.pids: dict[int, list[int]] = {}   # shell rank -> its tasks' pids
        self.exec_key = eventlog_key(jobid, "exec")
        config = ex.Config(
            barrier_timeout=fsd.parse_timeout(attrs["exec.barrier-timeout"]),
            shell_exit_timeout=fsd.parse_timeout(attrs["exec.shell-exit-timeout"]),
            kill_timeout=fsd.parse(attrs["exec.kill-timeout"]),
            expiration=R["execution"].get("expiration") or 0.0)
        self.ex = ex.Execution(jobid, self.ranks, {r: hosts[r] for r in self.ranks}, config,
                               service=self.service, taskmap=self.taskmap)
        self.barriers: dict[str, dict[int, object]] = {"init": {}, "start": {}}
        self.timers: dict[str, asyncio.TimerHandle] = {}

    @property
    def nshells(self) -> int:
        return len(self.ranks)


class JobExecService(Service):
    name = "job-exec"
    busy = "it runs the instance's jobs; it stops only with the instance"

    def __init__(self, ctx, *, kvs: KVSDirect):
        super().__init__(ctx)
        self.jobs: dict[int, ExecJob] = {}
        self.hosts = ctx.hosts      # rank -> host name: each shell is told its own
        self.kvs = kvs              # its exec eventlogs (kvs_direct.py)

    # ------------------------------------------------------ the one place
    def _handle(self, job: ExecJob, event) -> None:
        """Feed one event to the job's state machine and carry out what it returns."""
        before = job.ex.phase
        effects = job.ex.handle(event)
        if (job.ex.phase != before or effects) and log_enabled("debug"):
            self.log.debug("exec transition", jobid=fluid.f58_plain(job.id),
                           stimulus=repr(event), phase=f"{before}->{job.ex.phase}",
                           effects=len(effects))
        self._apply(job, effects)

    def _apply(self, job: ExecJob, effects: list) -> None:
        for e in effects:
            if isinstance(e, ex.Log):
                self.kvs.append(job.exec_key, entry(e.name, e.context))
            elif isinstance(e, ex.Report):
                self.respond(job.msg, {"id": job.id, "type": e.kind, "data": e.data})
            elif isinstance(e, ex.Signal):
                for sr in e.shell_ranks:
                    payload = {"label": self._label(job, sr), "signum": e.signum}
                    if e.tasks:
                        payload["tasks"] = True
                    self.send("rexec.kill", payload, nodeid=job.ranks[sr])
            elif isinstance(e, ex.Timer):
                self._set_timer(job, e)
            elif isinstance(e, ex.Answer):
                for sr in e.shell_ranks:
                    msg = job.barriers[e.barrier].pop(sr, None)
                    if msg is None:
                        continue
                    if e.error:
                        self.respond_exception(msg, Canceled(e.error))
                    else:
                        self.respond(msg, e.payload)
            elif isinstance(e, ex.Notify):
                self.send(f"{job.service}.{e.method}", e.payload, nodeid=job.ranks[0])
            elif isinstance(e, ex.Finished):
                for t in job.timers.values():
                    t.cancel()
                job.timers.clear()
                self.end_stream(job.msg)
                self.jobs.pop(job.id, None)

    def _set_timer(self, job: ExecJob, t: ex.Timer) -> None:
        old = job.timers.pop(t.name, None)
        if old is not None:
            old.cancel()
        if t.delay is None and t.at is None:
            return
        delay = t.delay if t.delay is not None else max(0.0, t.at - time.time())
        job.timers[t.name] = asyncio.get_running_loop().call_later(
            delay, lambda: self._handle(job, ex.TimerFired(t.name)))

    @staticmethod
    def _label(job: ExecJob, shell_rank: int) -> str:
        return f"{fluid.f58_plain(job.id)}.{shell_rank}"

    # --------------------------------------------------------------- start
    @handler("job-exec.start", schema=StartRequest, streaming=True,
              max_payload=CARRY_PAYLOAD)
    def start_job(self, msg, r):
        job = ExecJob(msg, r.id, r.userid, r.jobspec, r.R, r.request.shared(), self.hosts,
                      self.ctx.attrs)
        self.jobs[r.id] = job
        self._apply(job, job.ex.start())
        level = int(self.ctx.attrs.get("instance-level") or 0)
        critical = CriticalRanks(**job.ex.critical_info())
        for sr, rank in enumerate(job.ranks):
            info = ShellInfo(
                jobid=job.id, userid=job.userid, shell_rank=sr, ranks=job.ranks,
                counts=job.counts, taskmap=job.taskmap, service=job.service,
                jobspec=job.jobspec, R=job.R, cores=job.alloc[rank],
                gpus=job.gpus.get(rank, []), hostname=self.hosts[rank], critical=critical,
                instance_level=level)
            p = self.rpc("rexec.exec", {"kind": "shell", "info": info.as_payload(),
                                        "label": self._label(job, sr)},
                         nodeid=rank, streaming=True)
            p.on_response = lambda resp, job=job, sr=sr: self._rexec(job, sr, resp)
        return self.no_reply

    def _rexec(self, job: ExecJob, sr: int, resp) -> None:
        err = resp.error()
        if isinstance(err, EndOfStream):
            return
        if isinstance(err, HostUnreachable):
            self._handle(job, ex.ShellUnreachable(sr))
        elif err is not None:
            self._handle(job, ex.ShellStartFailed(sr, resp.errstr))
        elif resp.payload.get("type") == "started":
            self._handle(job, ex.ShellStarted(sr, resp.payload["pid"]))
        elif resp.payload.get("type") == "exited":
            self._handle(job, ex.ShellExited(sr, resp.payload["status"]))

    # ------------------------------------------------------------ barriers
    def _barrier(self, msg, r: BarrierRequest, name: str):
        job = self.jobs.get(r.id)
        if job is None or not 0 <= r.shell_rank < job.nshells:
            raise NotFound(f"no such job shell: {fluid.f58(r.id)}.{r.shell_rank}")
        job.barriers[name][r.shell_rank] = msg
        if r.pids is not None:
            job.pids[r.shell_rank] = list(r.pids[: job.counts[r.shell_rank]])
        self._handle(job, ex.BarrierEntered(name, r.shell_rank, r.error))
        return self.no_reply

    @handler("job-exec.shell-init", schema=BarrierRequest)
    def shell_init(self, msg, r):
        return self._barrier(msg, r, "init")

    @handler("job-exec.shell-start", schema=BarrierRequest)
    def shell_start(self, msg, r):
        return self._barrier(msg, r, "start")

    @handler("job-exec.proctable", schema=JobRequest, roles=ANY)
    def proctable(self, msg, r):
        """`job hostpids`: every task's host and pid, in task order, once every shell
        has entered the start barrier (as Flux's MPIR proctable)."""
        job = self.jobs.get(r.id)
        if job is None:
            raise NotFound(f"job {fluid.f58(r.id)} is not running")
        self.authorize(msg, job.userid, f"job {fluid.f58(r.id)}")
        if len(job.pids) < len(job.ranks):
            raise TryAgain(f"job {fluid.f58(r.id)}: its tasks have not all started")
        hosts, pids = [], []
        for sr, rank in enumerate(job.ranks):
            for pid in job.pids[sr]:
                hosts.append(self.hosts[rank] if rank < len(self.hosts) else "")
                pids.append(pid)
        return {"hosts": hosts, "pids": pids}

    # ---------------------------------------------------------- exceptions
    @handler("job-exec.exception", schema=ExceptionRequest)
    def exception(self, msg, r):
        """The job-manager recorded a fatal exception: terminate the job."""
        job = self.jobs.get(r.id)
        if job is not None and r.severity == 0:
            self._handle(job, ex.FatalException(r.type, r.note, r.wait_status))
        return {}

    @handler("job-exec.kill", schema=KillRequest)
    def kill(self, msg, r):
        """`fluxlite job kill`: the signal is for the tasks, whatever it is (SIGKILL
        and SIGSTOP cannot be forwarded by a shell, and must not stop the shell)."""
        job = self.jobs.get(r.id)
        if job is None:
            raise NotFound(f"job {fluid.f58(r.id)} is not running")
        self._handle(job, ex.KillTasks(r.signum))
        return {}

    # ------------------------------------------------------ critical ranks
    @handler("job-exec.critical-ranks", schema=CriticalRanksRequest, roles=ANY)
    def critical_ranks(self, msg, r):
        job = self.jobs.get(r.id)
        if job is None:
            self._not_running(msg, r.id)
            return self.no_reply
        self.authorize(msg, job.userid, f"job {fluid.f58(r.id)}")
        try:
            ranks = set(range(job.nshells)) if r.ranks == "all" else \
                idset.decode(r.ranks, below=max(job.nshells, 1 << 16))
        except ValueError:
            raise UsageError(f"invalid idset {r.ranks!r}: expected shell ranks like 0-1,3") \
                from None
        outside = ranks - set(range(job.nshells))
        if outside:
            raise UsageError(
                f"ranks {idset.encode(outside)} are not shell ranks of job "
                f"{fluid.f58(r.id)} (its shell ranks are 0-{job.nshells - 1})")
        self._handle(job, ex.SetCritical(frozenset(ranks)))
        return {}

    def _not_running(self, msg, jobid: int) -> None:
        """Refuse a request about a job not running here: ENOENT, saying whether the
        job-manager knows the job (asked by a message)."""
        def known(resp):
            self.respond_exception(msg, NotFound(
                f"unknown job id {fluid.f58(jobid)}" if resp.errnum
                else f"job {fluid.f58(jobid)} is not running"))
        self.rpc("job-manager.info", {"id": jobid}).on_response = known

    @handler("job-exec.critical-ranks-get", schema=JobRequest, roles=ANY)
    def critical_ranks_get(self, msg, r):
        job = self.jobs.get(r.id)
        if job is None:
            raise NotFound("job is not running")
        return job.ex.critical_info()
