"""The `job-exec` service (rank 0): runs jobs by starting a job shell on every rank.

For each job it asks `rexec` on every allocated rank to start one shell,
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
"""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import time

from ..errors import Canceled, NotFound, UsageError
from ..job import jobspec as js
from ..job import rset
from ..job.eventlog import entry, eventlog_key
from ..protocol.schema import (AnyMap, Idset, JobId, Name, Severity, Signal, Struct, Text,
                               WaitStatus)
from ..util import fluid, fsd, idset, procs
from .base import ANY, Service, handler


class StartRequest(Struct, kw_only=True):
    id: JobId
    userid: int
    jobspec: AnyMap
    R: AnyMap


class BarrierRequest(Struct, kw_only=True):
    id: JobId
    shell_rank: int
    error: Text | None = None


class ExceptionRequest(Struct, kw_only=True):
    id: JobId
    type: Name
    severity: Severity
    note: Text = ""
    wait_status: WaitStatus | None = None


class KillRequest(Struct, kw_only=True):
    id: JobId
    signum: Signal


class CriticalRanksRequest(Struct, kw_only=True):
    id: JobId
    ranks: Idset


class JobRequest(Struct, kw_only=True):
    id: JobId

PENDING, RUNNING, EXITED, LOST = "pending", "running", "exited", "lost"


class ShellProc:
    __slots__ = ("shell_rank", "rank", "state", "pid", "status", "rpc", "failing", "lost_notice")

    def __init__(self, shell_rank: int, rank: int):
        self.shell_rank = shell_rank
        self.rank = rank
        self.state = PENDING
        self.pid: int | None = None
        self.status: int | None = None
        self.rpc = None
        self.failing = False  # it reported its own failure and is exiting
        self.lost_notice: dict | None = None  # the lost-shell notice for the leader

    @property
    def active(self) -> bool:
        return self.state in (PENDING, RUNNING)


class ExecJob:
    def __init__(self, msg, jobid: int, userid: int, jobspec: dict, R: dict):
        self.msg = msg
        self.id = jobid
        self.userid = userid
        self.jobspec = jobspec
        self.req = js.request(jobspec)
        self.R = R
        self.alloc = rset.parse(R)
        self.ranks = sorted(self.alloc)
        self.counts = rset.layout(self.req, self.alloc)
        self.shells = [ShellProc(i, r) for i, r in enumerate(self.ranks)]
        self.critical = set(range(len(self.ranks)))
        self.crit_seq = 0
        self.leader_up = False
        self.barriers: dict[str, dict[int, object]] = {"init": {}, "start": {}}
        self.barrier_done: set[str] = set()
        self.fatal: dict | None = None
        self.timers: dict[str, asyncio.TimerHandle] = {}
        self.started = False
        self.finished = False
        self.service = f"{userid}-shell-{fluid.f58_plain(jobid)}"
        self.exec_key = eventlog_key(jobid, "exec")
        self.options = jobspec["attributes"]["system"].get("shell", {}).get("options", {})

    @property
    def nshells(self) -> int:
        return len(self.shells)


class JobExecService(Service):
    name = "job-exec"

    def __init__(self, ctx, *, kvs, known_job):
        super().__init__(ctx)
        self.jobs: dict[int, ExecJob] = {}
        self.hostname = ctx.hostname
        self.kvs = kvs
        self.known_job = known_job   # (jobid) -> bool: the job-manager knows it

    def _event(self, job: ExecJob, name: str, context: dict | None = None) -> None:
        self.kvs.append(job.exec_key, entry(name, context))

    def _reply(self, job: ExecJob, kind: str, data: dict | None = None) -> None:
        self.respond(job.msg, {"id": job.id, "type": kind, "data": data or {}})

    def _timer(self, job: ExecJob, name: str, delay: float, cb) -> None:
        old = job.timers.pop(name, None)
        if old:
            old.cancel()
        job.timers[name] = asyncio.get_running_loop().call_later(delay, cb)

    def _host(self, shell: ShellProc) -> str:
        """Host of a shell's rank (every rank of a local instance is on this machine)."""
        return self.hostname

    # --------------------------------------------------------------- start
    @handler("job-exec.start", schema=StartRequest, streaming=True)
    def start_job(self, msg, r):
        jobid, userid, spec, R = r.id, r.userid, r.jobspec, r.R
        job = ExecJob(msg, jobid, userid, spec, R)
        self.jobs[jobid] = job
        self._event(job, "init")
        self._event(job, "starting")
        a = self.ctx.attrs
        timeout = fsd.parse_timeout(a["exec.barrier-timeout"])
        if timeout:
            self._timer(job, "barrier", timeout, lambda: self._barrier_timeout(job))
        first = 0
        for shell, ntasks in zip(job.shells, job.counts):
            info = {
                "jobid": jobid, "userid": userid, "shell_rank": shell.shell_rank,
                "nshells": job.nshells, "ranks": job.ranks, "counts": job.counts,
                "first_task": first, "ntasks": sum(job.counts), "service": job.service,
                "leader_rank": job.ranks[0], "jobspec": spec, "R": R,
                "cores": job.alloc[shell.rank], "hostname": self.hostname,
                "critical": {"ranks": idset.encode(job.critical), "seq": job.crit_seq},
                "exec_key": job.exec_key, "output_key": eventlog_key(jobid, "output"),
                "instance_level": int(a.get("instance-level") or 0),
            }
            first += ntasks
            p = self.rpc("rexec.exec", {"kind": "shell", "info": info,
                                        "label": f"{fluid.f58_plain(jobid)}.{shell.shell_rank}"},
                         nodeid=shell.rank, streaming=True)
            shell.rpc = p
            p.on_response = lambda resp, job=job, shell=shell: self._rexec(job, shell, resp)
        return self.no_reply

    def _rexec(self, job: ExecJob, shell: ShellProc, resp) -> None:
        if resp.errnum:
            if resp.errnum == errno.ENODATA:
                return
            if resp.errnum == errno.EHOSTUNREACH:
                self._lost(job, shell, f"node failure on {self._host(shell)} "
                                       f"(rank {shell.rank}, shell rank {shell.shell_rank})",
                           "node failure")
            else:
                shell.state = EXITED
                shell.status = 1 << 8
                self._fatal(job, "exec", f"job shell failed to start on rank {shell.rank}: "
                                         f"{resp.errstr}")
                self._check_done(job)
            return
        p = resp.payload
        if p.get("type") == "started":
            shell.pid = p["pid"]
            if shell.state == PENDING:
                shell.state = RUNNING
        elif p.get("type") == "exited":
            self._shell_exited(job, shell, p["status"])

    # ------------------------------------------------------------ barriers
    def _barrier(self, msg, r: BarrierRequest, name: str):
        jobid, shell_rank = r.id, r.shell_rank
        job = self.jobs.get(jobid)
        if job is None or not 0 <= shell_rank < job.nshells:
            raise NotFound(f"no such job shell: {fluid.f58(jobid)}.{shell_rank}")
        if job.fatal is not None:
            raise Canceled("job is being terminated")
        if r.error:
            job.shells[shell_rank].failing = True
            self._fatal(job, "exec", r.error)
            raise Canceled("job is being terminated")
        job.barriers[name][shell_rank] = msg
        self._check_barrier(job, name)
        return self.no_reply

    def _check_barrier(self, job: ExecJob, name: str) -> None:
        if name in job.barrier_done:
            return
        waiting = job.barriers[name]
        if any(s.shell_rank not in waiting and s.active for s in job.shells):
            return
        job.barrier_done.add(name)
        if name == "init":
            job.leader_up = True
            self._event(job, "shell.init", {"service": job.service,
                                            "leader-rank": job.ranks[0],
                                            "size": job.nshells})
            # shells lost before the leader was up: their notices come with the answer
            answer = {"critical": {"ranks": idset.encode(job.critical), "seq": job.crit_seq},
                      "lost": [s.lost_notice for s in job.shells if s.lost_notice]}
        else:
            t = job.timers.pop("barrier", None)
            if t:
                t.cancel()
            self._event(job, "shell.start", {"taskmap": rset.taskmap(job.counts)})
            answer = {}
            job.started = True
            self._reply(job, "start")
            self._arm_expiration(job)
        for m in waiting.values():
            self.respond(m, answer)
        waiting.clear()

    @handler("job-exec.shell-init", schema=BarrierRequest)
    def shell_init(self, msg, r):
        return self._barrier(msg, r, "init")

    @handler("job-exec.shell-start", schema=BarrierRequest)
    def shell_start(self, msg, r):
        return self._barrier(msg, r, "start")

    def _barrier_timeout(self, job: ExecJob) -> None:
        if "start" in job.barrier_done:
            return
        name = "init" if "init" not in job.barrier_done else "start"
        late = [s for s in job.shells if s.active and s.shell_rank not in job.barriers[name]]
        if late:
            self._fatal(job, "exec", f"job shells on rank[s] "
                                     f"{idset.encode(s.rank for s in late)} did not start in time")

    def _arm_expiration(self, job: ExecJob) -> None:
        exp = job.R["execution"].get("expiration") or 0
        if exp:
            self._timer(job, "expire", max(0.0, exp - time.time()),
                        lambda: self._raise(job, "timeout", 0, "resource allocation expired"))

    # ------------------------------------------------------ shells ending
    def _shell_exited(self, job: ExecJob, shell: ShellProc, status: int) -> None:
        if not shell.active:
            return
        host = self._host(shell)
        if os.WIFSIGNALED(status) and job.fatal is None and "init" in job.barrier_done \
                and shell.shell_rank != 0:
            # a follower shell killed by a signal is a lost shell, like a lost node
            how = procs.signal_name(os.WTERMSIG(status))
            shell.status = status
            self._lost(job, shell, f"shell rank {shell.shell_rank} (on {host}, rank "
                                   f"{shell.rank}): {how}", how)
            return
        shell.state = EXITED
        shell.status = status
        if "init" not in job.barrier_done and job.fatal is None:
            self._fatal(job, "exec", f"{host} (rank {shell.rank}) terminated before first "
                                     "barrier")
        elif os.WIFSIGNALED(status) and job.fatal is None:
            how = procs.signal_name(os.WTERMSIG(status))
            self._fatal(job, "exec", f"shell rank 0 (on {host}, rank {shell.rank}): {how}",
                        {"shell_rank": 0, "rank": shell.rank, "host": host, "reason": how})
        if shell.shell_rank == 0 and not os.WIFSIGNALED(status):
            active = [s for s in job.shells if s.active]
            ctx = {"rank": shell.rank, "wait_status": status}
            if active:
                ctx["active_ranks"] = idset.encode(s.rank for s in active)
                limit = fsd.parse_timeout(self.ctx.attrs["exec.shell-exit-timeout"])
                if limit and job.fatal is None:
                    self._timer(job, "shell-exit", limit,
                                lambda: self._shell_exit_timeout(job, limit))
            self._event(job, "shell-exit", ctx)
        for name in ("init", "start"):
            self._check_barrier(job, name)
        self._check_done(job)

    def _shell_exit_timeout(self, job: ExecJob, limit: float) -> None:
        active = [s for s in job.shells if s.active]
        if not active or job.fatal is not None:
            return
        ranks = idset.encode(s.rank for s in active)
        self._raise(job, "exec", 0,
                    f"job shells still active on {self.hostname} (rank{'s' if len(active) > 1 else ''}"
                    f" {ranks}) {fsd.format(limit)} after leader shell exit",
                    {"active_ranks": ranks})

    def _lost(self, job: ExecJob, shell: ShellProc, note: str, reason: str) -> None:
        if not shell.active:
            return
        shell.state = LOST
        critical = shell.shell_rank == 0 or shell.shell_rank in job.critical
        ctx = {"shell_rank": shell.shell_rank, "rank": shell.rank, "host": self._host(shell),
               "reason": reason}
        if job.fatal is None or not critical:
            self._raise(job, "node-failure", 0 if critical else 2, note, ctx)
        leader = job.shells[0]
        shell.lost_notice = {"type": "lost-shell", "severity": 0 if critical else 2,
                             "shell_rank": shell.shell_rank, "message": note}
        if shell.shell_rank != 0 and job.leader_up and leader.active:
            self.send(f"{job.service}.exception", shell.lost_notice, nodeid=leader.rank)
        for name in ("init", "start"):
            self._check_barrier(job, name)
        self._check_done(job)

    def _check_done(self, job: ExecJob) -> None:
        if job.finished or any(s.active for s in job.shells):
            return
        job.finished = True
        for t in job.timers.values():
            t.cancel()
        job.timers.clear()
        exited = [s for s in job.shells if s.state == EXITED and s.status is not None]
        # a non-critical shell's tasks do not decide how the job ended (a persisting
        # instance's lost leaf broker must not turn the batch script's status into 137)
        decisive = [s for s in exited if s.shell_rank in job.critical] or exited
        status = max((s.status for s in decisive), key=_severity) if decisive else 1 << 8
        if job.fatal is not None and "wait_status" in job.fatal:
            # the exception names the task that ended the job (doom): its status wins
            status = procs.wait_status_to_exit_code(job.fatal["wait_status"]) << 8
        if job.fatal is not None and status == 0:
            status = 1 << 8
        self._event(job, "complete", {"status": status})
        self._reply(job, "finish", {"status": status})
        self._event(job, "done")
        self._reply(job, "release", {"ranks": "all", "final": True})
        self.end_stream(job.msg)
        del self.jobs[job.id]

    # ---------------------------------------------------------- exceptions
    def _raise(self, job: ExecJob, etype: str, severity: int, note: str,
               context: dict | None = None) -> None:
        """Raise an exception on the job (through the job-manager); fatal ones kill it."""
        data = {"type": etype, "severity": severity, "note": note}
        if context:
            data["context"] = context
        if severity == 0:
            if job.fatal is not None:
                return
            job.fatal = data
        self._reply(job, "exception", data)
        if severity == 0:
            self._terminate(job, signal.SIGALRM if etype == "timeout" else signal.SIGTERM)

    def _fatal(self, job: ExecJob, etype: str, note: str, context: dict | None = None) -> None:
        self._raise(job, etype, 0, note, context)

    @handler("job-exec.exception", schema=ExceptionRequest)
    def exception(self, msg, r):
        """The job-manager recorded a fatal exception: terminate the job."""
        job = self.jobs.get(r.id)
        if job is None or r.severity != 0 or job.fatal is not None:
            return {}
        job.fatal = {"type": r.type, "severity": 0, "note": r.note}
        if r.wait_status is not None:
            job.fatal["wait_status"] = r.wait_status
        self._terminate(job, signal.SIGALRM if r.type == "timeout" else signal.SIGTERM)
        return {}

    def _terminate(self, job: ExecJob, sig: int) -> None:
        for t in ("expire", "shell-exit"):
            h = job.timers.pop(t, None)
            if h:
                h.cancel()
        self._signal(job, sig)
        kill_timeout = fsd.parse(self.ctx.attrs["exec.kill-timeout"])
        self._timer(job, "kill", kill_timeout, lambda: self._signal(job, signal.SIGKILL))
        # a job whose shells never started has nothing to wait for
        self._check_done(job)

    def _signal(self, job: ExecJob, sig: int, *, tasks: bool = False) -> None:
        """Signal the job's shells (which forward termination signals to their tasks),
        or with `tasks` the processes below each shell directly."""
        for s in job.shells:
            if s.active and (not s.failing or sig == signal.SIGKILL):
                payload = {"label": f"{fluid.f58_plain(job.id)}.{s.shell_rank}",
                           "signum": int(sig)}
                if tasks:
                    payload["tasks"] = True
                self.send("rexec.kill", payload, nodeid=s.rank)

    @handler("job-exec.kill", schema=KillRequest)
    def kill(self, msg, r):
        """`fluxlite job kill`: the signal is for the tasks, whatever it is (SIGKILL
        and SIGSTOP cannot be forwarded by a shell, and must not stop the shell)."""
        job = self.jobs.get(r.id)
        if job is None:
            raise NotFound(f"job {fluid.f58(r.id)} is not running")
        if not 0 < r.signum < signal.NSIG:
            raise UsageError(f"invalid signal {r.signum}")
        self._signal(job, r.signum, tasks=True)
        return {}

    # ------------------------------------------------------ critical ranks
    @handler("job-exec.critical-ranks", schema=CriticalRanksRequest, roles=ANY)
    def critical_ranks(self, msg, r):
        jobid, text = r.id, r.ranks
        job = self.jobs.get(jobid)
        if job is None:
            raise NotFound(f"job {fluid.f58(jobid)} is not running" if self.known_job(jobid)
                           else f"unknown job id {fluid.f58(jobid)}")
        self.authorize(msg, job.userid, f"job {fluid.f58(jobid)}")
        try:
            ranks = set(range(job.nshells)) if text == "all" else idset.decode(text)
        except ValueError:
            raise UsageError(f"invalid idset {text!r}: expected shell ranks like 0-1,3") \
                from None
        outside = ranks - set(range(job.nshells))
        if outside:
            raise UsageError(
                f"ranks {idset.encode(outside)} are not shell ranks of job "
                f"{fluid.f58(jobid)} (its shell ranks are 0-{job.nshells - 1})")
        ranks.add(0)  # the leader shell is always critical
        job.critical = ranks
        job.crit_seq += 1
        self._event(job, "critical-ranks", {"ranks": idset.encode(ranks), "seq": job.crit_seq})
        leader = job.shells[0]
        if job.leader_up and leader.active:
            self.send(f"{job.service}.critical-ranks",
                      {"ranks": idset.encode(ranks), "seq": job.crit_seq}, nodeid=leader.rank)
        return {}

    @handler("job-exec.critical-ranks-get", schema=JobRequest, roles=ANY)
    def critical_ranks_get(self, msg, r):
        job = self.jobs.get(r.id)
        if job is None:
            raise NotFound("job is not running")
        return {"ranks": idset.encode(job.critical), "seq": job.crit_seq}


def _severity(status: int) -> int:
    """Order wait statuses by how badly a shell ended (signals above exit codes)."""
    return procs.wait_status_to_exit_code(status)
