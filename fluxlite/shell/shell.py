"""The job shell: one process per job per rank, forked from the broker's spawner.

Life of a shell:
    connect to the local broker; the leader (shell rank 0) registers the job's
    shell service "<uid>-shell-<id>"
    load plugins, run shell.init                       -> init barrier (job-exec)
    start the local tasks (task.init, task.exec)       -> start barrier, shell.start
    serve: output, task exits (task.exit), service requests
    when the local tasks are done: followers tell the leader (tasks-done);
    the leader waits until every critical shell is done or lost
    shell.exit, then exit with the largest task exit code (128+signal if signalled)

A job's only shell does not wait at the barriers (as Flux's shell): it tells
job-exec it entered and goes on, and waits for the answers before it exits.

The leader tracks which shells are done or lost, so it never waits for one
that is gone; it keeps the job's critical ranks (pushed by job-exec) and
hands each new set to `shell.critical-ranks` callbacks.

The shell starts from its ShellInfo (fluxlite/job/shell_info.py, typed and
checked before it was forked).  Plugins (plugin.py) never see this object:
each gets the shell's ShellContext (context.py), which offers what they may use.
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import sys
from collections.abc import Sequence

from ..client.aio import AsyncHandle
from ..errors import FluxliteError, PluginError, UsageError
from ..job import eventlog as jel
from ..job import shell_options, taskmap
from ..job.jobspec import command_name
from ..job.shell_info import ShellInfo
from ..protocol import message as m
from ..protocol.dispatch import Dispatcher, handler
from ..protocol.schema import Idset, Seq, Severity, Struct, Text
from ..util import fluid, idset, mustache
from ..util.compat import FLUX_MIRRORED, flux_compat
from .context import ShellContext
from .plugin import PluginStack
from .task import Task


class ShellRankRequest(Struct, kw_only=True):
    shell_rank: int


class ShellExceptionRequest(Struct, kw_only=True):
    type: Text
    shell_rank: int = -1
    severity: Severity = 0
    message: Text = ""


class CriticalRanksPush(Struct, kw_only=True):
    ranks: Idset
    seq: Seq


class _ShellLog:
    """The dispatcher's logger in a shell: one line on the shell's stderr."""

    def __init__(self, shell):
        self.shell = shell

    def error(self, event: str, **kw) -> None:
        detail = kw.get("error") or ""
        print(f"fluxlite-shell[{self.shell.rank}]: ERROR: {event} {detail}".rstrip(),
              file=sys.stderr, flush=True)
        tb = kw.get("traceback")
        if tb:
            print(tb, file=sys.stderr, flush=True)

    def debug(self, event: str, **kw) -> None:
        """Dropped: a shell's stderr is the job's, and debug lines would flood it."""


class JobShell:
    """The shell's own state and life; plugins see it only through `self.context`."""

    def __init__(self, info: ShellInfo, instance_env: dict[str, str] | None = None,
                 tmpdir: str | None = None):
        self.info = info
        # the environment the instance hands its processes (its Flux compatibility
        # switch); the tasks' own comes from the jobspec
        self.instance_env = os.environ if instance_env is None else instance_env
        self.tmpdir = tmpdir or None    # the job's private directory here (the spawner's)
        # with a state directory, the answer that says the job's alloc is on disk: the
        # tasks wait for it, so a restart after a crash ends the job, never runs it again
        self._durable = None
        self.jobid: int = info.jobid
        self.rank: int = info.shell_rank          # shell rank
        self.nshells: int = info.nshells
        self.is_leader = self.rank == 0
        self.jobspec: dict = info.jobspec
        sysattrs = self.jobspec["attributes"]["system"]
        # Flux's nested spelling of the options read as fluxlite's dotted names
        self.options: dict = shell_options.canonical(
            dict(sysattrs.get("shell", {}).get("options", {})))
        verbose = self.options.get("verbose", 0)  # -o verbose: 1, -o verbose=2: more
        self.verbose: int = verbose if type(verbose) is int else 0
        self.command: list[str] = self.jobspec["tasks"][0]["command"]
        self.arg0 = os.path.basename(self.command[0])
        self.hostname: str = info.hostname
        self.service: str = info.service
        self.leader_rank: int = info.leader_rank
        self.broker_rank: int = info.broker_rank
        self.local_uri: str = info.local_uri
        self.ntasks: int = info.ntasks
        self.nlocal: int = info.nlocal
        self._eventlog_keys = {name: jel.eventlog_key(self.jobid, name)
                               for name in ("exec", "output", "input")}
        # the global ranks of this shell's tasks: consecutive in a block map (arithmetic,
        # whatever the count), listed from the job's taskmap otherwise (--taskmap)
        first = info.first_task
        self.task_ranks: Sequence[int] = range(first, first + self.nlocal) \
            if taskmap.is_block(info.taskmap) else taskmap.ranks_of(info.taskmap, self.rank)
        self.tasks: list[Task] = []
        self.plugins = PluginStack(self.log_error, self.spawn)
        self.context = ShellContext(self)   # what the plugins are given
        # requests to the job's shell service ("<service>.<method>"), from job-exec and
        # the other shells, go through the one dispatcher (owner only, shapes checked)
        self.dispatcher = Dispatcher(self._send_response, _ShellLog(self))
        self.output_sinks: list = []        # add(task, stream, data, eof), flush()
        self.critical_ranks: set[int] = idset.decode(info.critical.ranks)
        self.critical_seq: int = info.critical.seq
        self._announced_seq: int | None = None  # the last set given to plugins
        self.early_signals: list[int] = []  # forwarded signals, for tasks that start later
        self.done_shells: set[int] = set()
        self.lost_shells: set[int] = set()
        self._progress = asyncio.Event()
        self._tasks_complete: asyncio.Future | None = None
        self._started = asyncio.Event()  # task.exit callbacks wait for shell.start
        self._exit_callbacks: list = []
        self.exit_code = 0
        self.h: AsyncHandle | None = None
        self._outstanding = 0
        self._lost_commits: list[str] = []   # errors of KVS commits that failed
        self._drained = asyncio.Event()
        self._drained.set()

    # ------------------------------------------- what ShellContext offers plugins
    def mustache_values(self, rank: int | None = None) -> dict[str, str]:
        """Values of the mustache tags ({{id}}, {{taskid}}, ...) on this shell, for the
        task of global rank `rank` (job and node tags only when None)."""
        values = getattr(self, "_mustache", None)
        if values is None:
            cores = self.info.cores
            values = mustache.job_values(self.jobid, name=command_name(self.jobspec),
                                         nnodes=self.nshells, size=self.ntasks,
                                         tmpdir=self.tmpdir)
            values.update(mustache.node_values(
                node_id=self.rank, name=self.hostname, broker_rank=self.broker_rank,
                cores=idset.encode(cores), ncores=len(cores)))
            self._mustache = values
        if rank is None:
            return values
        return dict(values, **mustache.task_values(rank, self.task_ranks.index(rank)))

    def log_error(self, message: str) -> None:
        self.log(message, "ERROR")

    def log(self, message: str, level: str = "INFO") -> None:
        """A line in the job's output log, shown by `run`/`attach` as flux-shell[R]: LEVEL: msg."""
        print(f"fluxlite-shell[{self.rank}]: {level}: {message}", file=sys.stderr, flush=True)
        self.append_eventlog("output", [jel.entry("log", {"rank": self.rank, "level": level,
                                                          "message": message})])

    def debug(self, message: str, level: int = 1) -> None:
        """A log line shown only with -o verbose=LEVEL or more (INFO at 1, DEBUG above)."""
        if self.verbose >= level:
            self.log(message, "INFO" if level <= 1 else "DEBUG")

    def exec_event(self, name: str, context: dict | None = None) -> None:
        """Append an entry to the job's exec eventlog."""
        self.append_eventlog("exec", [jel.entry(name, context)])

    def append_eventlog(self, name: str, entries: list[dict]) -> None:
        """Append to the job's `name` eventlog (exec, output, input) in one KVS commit;
        the shell waits for every outstanding commit before exiting."""
        key = self._eventlog_keys.get(name)
        if key is None:
            raise ValueError(f"no eventlog {name!r} (exec, output, input)")
        if self.h is None or not self.h.connected:
            return
        self._no_wait(self.h.rpc("kvs.commit", {"ops": [{"key": key, "append": entries}]}),
                      "kvs commit failed", self._lost_commits)

    def _no_wait(self, p, what: str, failures: list[str] | None = None) -> None:
        """An RPC the shell does not wait for now, but sees answered before it exits
        (an error answer is a line on its stderr, after `what`, and is added to
        `failures` if given)."""
        self._outstanding += 1
        self._drained.clear()
        p.on_response = functools.partial(self._answered, what, failures)

    def _answered(self, what: str, failures: list[str] | None, msg) -> None:
        if msg.errnum:
            print(f"fluxlite-shell[{self.rank}]: {what}: {msg.errstr}",
                  file=sys.stderr, flush=True)
            if failures is not None:
                failures.append(msg.errstr)
        self._outstanding -= 1
        if self._outstanding == 0:
            self._drained.set()

    async def raise_exception(self, etype: str, severity: int, note: str,
                              context: dict | None = None,
                              wait_status: int | None = None) -> None:
        """Raise an exception on the job; a fatal one with `wait_status` makes the job
        finish with that task's status (as Flux's flux_shell_raise_exit_status)."""
        payload = {"id": self.jobid, "type": etype, "severity": severity, "note": note}
        if context:
            payload["context"] = context
        if wait_status is not None:
            payload["wait_status"] = int(wait_status)
        try:
            await self.h.call("job-manager.raise", payload)
        except FluxliteError as exc:
            print(f"fluxlite-shell[{self.rank}]: raise failed: {exc}", file=sys.stderr)

    def send_leader(self, method: str, payload: dict) -> None:
        """A request to the leader's shell service that wants no response."""
        self.h.send(f"{self.service}.{method}", payload, nodeid=self.leader_rank)

    async def call_leader(self, method: str, payload: dict) -> dict:
        return await self.h.call(f"{self.service}.{method}", payload, nodeid=self.leader_rank)

    def forward_signal(self, sig: int) -> None:
        """A signal the shell received: to every local task's process group (and to
        tasks not started yet, as they start), then to `shell.signal` callbacks."""
        if sig not in (signal.SIGCONT, signal.SIGWINCH):
            # tasks not started yet get it as they start (a job cancelled during its
            # start must not wait for the kill timeout)
            self.early_signals.append(sig)
        for task in self.tasks:
            task.kill(sig)
        self.plugins.call_now("shell.signal", sig)

    def set_critical(self, ranks: set[int], seq: int) -> bool:
        """Adopt a critical-ranks update unless it is stale; True if it was adopted."""
        if seq < self.critical_seq or (seq == self.critical_seq and ranks == self.critical_ranks
                                       and seq != 0):
            return False
        self.critical_ranks, self.critical_seq = set(ranks), seq
        return True

    # -------------------------------------------------------------------- run
    async def run(self) -> int:
        # no connection monitor: if the broker dies, its spawner kills this shell
        self.h = await AsyncHandle(self.local_uri, monitor=False).connect()
        # the shell is the instance's own: what it is told need not wait for the state
        # directory (users hear of what it does through messages that do)
        self.h.request_flags = m.INSTANCE
        self._durable = (self.h.rpc("rexec.wait-durable", {"write_out": self.info.durable})
                         if self.info.durable else None)
        self.h.on_request = self.dispatcher.dispatch
        try:
            await self._run()
        except PluginError as exc:
            self.log(str(exc), "FATAL")
            await self._init_failed(str(exc))
            self.exit_code = max(self.exit_code, 1)
        finally:
            for task in self.tasks:
                task.kill_group()  # background processes a task left in its group
            await self._flush()
            self.dispatcher.stop()
            self.h.close()
        return self.exit_code

    def _send_response(self, msg) -> None:
        if self.h is not None and self.h.connected:
            self.h.send_message(msg)

    def spawn(self, coro):
        """Run a coroutine owned by the shell (its failure is logged, never lost)."""
        return self.dispatcher.spawn(coro)

    async def _run(self) -> None:
        registered = None
        if self.is_leader:
            # pipelined: the broker handles it before the init barrier request that follows
            registered = self.h.rpc("service.add", {"service": self.service,
                                                           "pid": os.getpid()})
            self.dispatcher.add_object(self, prefix=f"{self.service}.")
            self.append_eventlog("output", [jel.entry("header", {
                "version": 1, "encoding": {"stdout": "UTF-8", "stderr": "UTF-8"},
                "count": {"stdout": self.ntasks, "stderr": self.ntasks}, "options": {}})])
        from .plugins import builtin_plugins
        for cls in builtin_plugins(self.context):
            self.plugins.add(cls(self.context))
        self.plugins.load_user(self.options, lambda cls: cls(self.context),
                               functools.partial(self.log, level="WARN"))
        if self.verbose:
            self.debug(f"{fluid.f58(self.jobid)}: {self.ntasks} task(s) on {self.nshells} "
                       f"node(s); this shell (host {self.hostname}, broker rank "
                       f"{self.broker_rank}) runs tasks {idset.encode(self.task_ranks)}")
            self.debug("plugins: " + ", ".join(p.name for p in self.plugins.plugins), 2)
        for p in self.plugins.plugins:
            self.dispatcher.add_object(p, prefix=f"{self.service}.")
        await self.plugins.call("shell.init", strict=True)
        resp = await self._barrier("init")
        if resp is None:   # alone: the critical ranks are those the shell started with
            critical, seq, lost = set(self.critical_ranks), self.critical_seq, ()
        else:
            crit = resp.get("critical") or {}
            critical, seq = idset.decode(crit.get("ranks", "")), crit.get("seq", 0)
            lost = resp.get("lost") or ()
        if registered is not None:
            await registered.get()
        if self.is_leader:
            announce = self._adopt_critical(critical, seq)
            if announce is not None:
                await announce
            # shells lost before the barrier were never announced one by one
            for notice in lost:
                self._lost_shell(notice)
        if self._durable is not None:
            await self._durable.get()
        await self._start_tasks()
        try:
            await self._barrier("start")
        except FluxliteError as exc:
            # the job is being terminated (e.g. a task could not start): let tasks end
            print(f"fluxlite-shell[{self.rank}]: start barrier: {exc}", file=sys.stderr,
                  flush=True)
        else:
            await self.plugins.call("shell.start")
        self._started.set()
        await asyncio.gather(*(t.done for t in self.tasks))
        await asyncio.gather(*self._exit_callbacks)
        # local tasks are complete
        if self.is_leader:
            self._shell_done(self.rank)
            await self._wait_for_critical_shells()
            if self._tasks_complete is not None:
                await self._tasks_complete
        else:
            self.send_leader("tasks-done", {"shell_rank": self.rank})
        await self.plugins.call("shell.exit")

    async def _barrier(self, name: str) -> dict | None:
        """Enter job-exec's `name` barrier and wait for every shell.  A job's only shell
        has no one to wait for (Flux's shell makes its barriers no-ops then): job-exec
        still hears it enter (the exec eventlog, the job's start), but the shell goes on
        at once, sees the answer before it exits, and gets None here."""
        topic, payload = f"job-exec.shell-{name}", {"id": self.jobid, "shell_rank": self.rank}
        if name == "start":   # job-exec's proctable (`job hostpids`)
            payload["pids"] = [t.pid for t in self.tasks if t.pid]
        if self.nshells == 1:
            self._no_wait(self.h.rpc(topic, payload), f"{name} barrier")
            return None
        return await self.h.call(topic, payload)

    async def _init_failed(self, why: str) -> None:
        try:
            await self.h.call("job-exec.shell-init", {"id": self.jobid, "shell_rank": self.rank,
                                                      "error": why}, timeout=5)
        except Exception:
            pass

    async def _start_tasks(self) -> None:
        env = dict(self.jobspec["attributes"]["system"].get("environment", {}))
        env.update({
            "FLUXLITE_JOB_ID": fluid.f58(self.jobid),
            "FLUXLITE_JOB_SIZE": str(self.ntasks),
            "FLUXLITE_JOB_NNODES": str(self.nshells),
            "FLUXLITE_URI": self.local_uri,
            "FLUXLITE_SHELL_RANK": str(self.rank),
            # as Flux's shell: the job's guest namespace is its tasks' default
            "FLUXLITE_KVS_NAMESPACE": f"job-{self.jobid}",
        })
        if self.tmpdir:
            # as Flux's FLUX_JOB_TMPDIR: private to the job on this node, removed with it
            env["FLUXLITE_JOB_TMPDIR"] = self.tmpdir
        # Flux compatibility, on for the instance or in the job's environment
        compat = flux_compat(self.instance_env) or flux_compat(env)
        if compat:
            env.update({"FLUX_" + k[len("FLUXLITE_"):]: env[k] for k in FLUX_MIRRORED if k in env})
        cwd = self.jobspec["attributes"]["system"].get("cwd") or "/"
        on_output = self._on_output
        templated = any("{{" in a for a in self.command)   # most commands have no tag
        for localid in range(self.nlocal):
            rank = self.task_ranks[localid]
            tenv = dict(env, FLUXLITE_TASK_RANK=str(rank), FLUXLITE_TASK_LOCAL_ID=str(localid))
            if compat:
                tenv.update(FLUX_TASK_RANK=str(rank), FLUX_TASK_LOCAL_ID=str(localid))
            for var, template in (self.options.get("env-expand") or {}).items():
                # Flux's env-expand: a variable whose value names the job's tags
                tenv[var] = mustache.render(str(template), self.mustache_values(rank))
            argv = ([mustache.render(a, self.mustache_values(rank)) for a in self.command]
                    if templated else self.command)
            task = Task(localid, rank, argv, tenv, cwd)
            task.setpgrp = not self.options.get("nosetpgrp")
            self.tasks.append(task)
            await self.plugins.call("task.init", task)
            await self.plugins.call("task.exec", task)
            task.start(on_output, self.early_signals)
            if self.verbose >= 2 and task.pid is not None:
                self.debug(f"task {rank}: started {' '.join(argv)} (pid {task.pid})", 2)
            if task.start_error:
                note = f"task {rank} (host {self.hostname}): start failed: {task.start_error}"
                self.log(note, "FATAL")
                await self.raise_exception("exec", 0, note)
            task.done.add_done_callback(lambda f, task=task: self._task_exited(task))

    def _on_output(self, task: Task, stream: str, data: bytes, eof: bool = False) -> None:
        for sink in self.output_sinks:
            sink.add(task, stream, data, eof)

    def _task_exited(self, task: Task) -> None:
        self.exit_code = max(self.exit_code, task.exitcode or 0)
        if self.verbose:
            self.debug(f"task {task.rank}: {task.disposition()}")

        async def deliver():
            await self._started.wait()
            await self.plugins.call("task.exit", task)
        self._exit_callbacks.append(self.spawn(deliver()))

    # ----------------------------------------------------------- leader side
    def _shell_done(self, shell_rank: int) -> None:
        self.done_shells.add(shell_rank)
        self._progress.set()
        self._maybe_tasks_complete()

    def _maybe_tasks_complete(self) -> None:
        if self._tasks_complete is None and \
                len(self.done_shells | self.lost_shells) >= self.nshells:
            self._tasks_complete = self.spawn(self.plugins.call("shell.tasks-complete"))

    async def _wait_for_critical_shells(self) -> None:
        """Leader: wait until every critical shell is done or lost (never for a lost one)."""
        while True:
            waiting = self.critical_ranks - self.done_shells - self.lost_shells
            if not waiting:
                return
            self._progress.clear()
            await self._progress.wait()

    # the leader's methods (this object's @handler methods, under the job's service)
    @handler("tasks-done", schema=ShellRankRequest)
    def _m_tasks_done(self, msg, req) -> dict:
        self._shell_done(req.shell_rank)
        return {}

    @handler("exception", schema=ShellExceptionRequest)
    def _m_exception(self, msg, req) -> dict:
        if req.type == "lost-shell":
            self._lost_shell({"shell_rank": req.shell_rank, "severity": req.severity,
                              "message": req.message})
        return {}

    def _lost_shell(self, p: dict) -> None:
        """job-exec says a shell is gone: stop waiting for it and tell the plugins (once)."""
        sr = int(p["shell_rank"])
        if sr in self.lost_shells:
            return
        severity = int(p.get("severity", 0))
        message = str(p.get("message", ""))
        if message:
            print(f"fluxlite-shell[0]: WARNING: {message}", file=sys.stderr, flush=True)
        self.lost_shells.add(sr)
        self._progress.set()
        self._maybe_tasks_complete()
        self.spawn(self.plugins.call("shell.lost", sr, severity, message))

    @handler("critical-ranks", schema=CriticalRanksPush)
    def _m_critical_ranks(self, msg, req) -> dict:
        try:
            ranks = idset.decode(req.ranks, below=max(self.nshells, 1 << 16))
        except ValueError as exc:
            raise UsageError(f"critical-ranks: {exc}") from None
        announce = self._adopt_critical(ranks, req.seq)
        if announce is not None:
            self.spawn(announce)
        return {}

    def _adopt_critical(self, ranks: set[int], seq: int):
        """A critical-ranks update (pushed, or with the init answer): adopt it unless it
        is stale.  Returns the `shell.critical-ranks` call to make (once per adopted
        set; the first, with the set the job starts with, even if nothing changed),
        or None."""
        adopted = self.set_critical(ranks, seq)
        if not adopted and self._announced_seq is not None:
            return None
        self._announced_seq = self.critical_seq
        self._progress.set()
        return self.plugins.call("shell.critical-ranks", set(self.critical_ranks),
                                 self.critical_seq)

    async def _flush(self) -> None:
        """Before the shell exits, every commit of the job's output and events is
        answered: the shell waits as long as the instance lives (the job's time limit
        and cancel still end it).  If any failed, what they carried is lost, and the
        job gets an exception that says so."""
        for sink in self.output_sinks:
            sink.flush()
        await self._drained.wait()
        if self._lost_commits and self.h is not None and self.h.connected:
            n, why = len(self._lost_commits), self._lost_commits[-1]
            await self.raise_exception(
                "exec", 0, f"job output lost: {n} write(s) of its output or events to "
                           f"the KVS failed on shell rank {self.rank} ({why})")
