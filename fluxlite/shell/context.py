"""ShellContext: the whole of what a shell plugin may use of the job shell.

Every plugin gets one as `self.shell` (as Flux's plugins get `flux_shell_t` and
its calls in flux/shell.h, never the shell's internals).  The built-in plugins
use it and nothing else; tests/unit/test_shell_context.py checks that they do.

Facts (read-only):
    info            the shell's ShellInfo (fluxlite/job/shell_info.py): the job, its
                    resources, this shell's place; typed fields
    jobid, f58, rank, nshells, is_leader, ntasks, nlocal, hostname, service
    task_ranks      the global ranks of this shell's tasks, in local order
    tasks           this shell's tasks started so far (shell/task.py)
    options         the job's shell options (-o), read-only
    jobspec         the job's jobspec
    command         the job's command (argv, mustache tags unexpanded)
    arg0            the command's base name, for messages
    verbose         -o verbose's level
    tmpdir          the job's private directory on this node (None: none)
    critical_ranks  the job's critical shell ranks (leader: kept current)
    mustache_values(rank)   the values of {{id}}, {{taskid}}, ... for a task
    plugin(name)    another loaded plugin, or None

Logging:  log(message, level), debug(message, level) (-o verbose=LEVEL)
Eventlogs of the job:  exec_event(name, context), append_eventlog(name, entries)
    (name: exec, output or input; committed before the shell exits)
Messages:
    rpc(topic, payload, nodeid=, streaming=)   a request to a broker service
    call_leader(method, payload)               await the leader shell's method
    send_leader(method, payload)               ... that wants no answer
    respond(msg, payload)                      answer a request a handler kept
    respond_exception(msg, exc), end_stream(msg) refuse it (an error tree class), end a stream
    (a plugin serves methods of the job's shell service with @handler, plugin.py)
The job:
    raise_exception(type, severity, note, context, wait_status)   a job exception
    forward_signal(signum)   pass a received signal on to the tasks (and to those
                             that start later), then to `shell.signal` callbacks
    add_output_sink(sink)    sink.add(task, stream, data, eof) gets the tasks' output,
                             sink.flush() is called before the shell exits
    subscribe(topic, callback)   call `callback` on a plugin topic too
    spawn(coro)              run a coroutine owned by the shell (failures logged)
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping, Sequence

from ..errors import EndOfStream, FluxliteError
from ..job.shell_info import ShellInfo
from ..util import fluid


class ShellContext:
    """A plugin's view of one job shell (see the module's docstring)."""

    __slots__ = ("_shell", "_options")

    def __init__(self, shell):
        self._shell = shell
        self._options = types.MappingProxyType(shell.options)

    # ------------------------------------------------------------------ facts
    @property
    def info(self) -> ShellInfo:
        return self._shell.info

    @property
    def jobid(self) -> int:
        return self._shell.jobid

    @property
    def f58(self) -> str:
        """The job's id in F58, plain (ASCII)."""
        return fluid.f58_plain(self._shell.jobid)

    @property
    def rank(self) -> int:
        """This shell's rank among the job's shells."""
        return self._shell.rank

    @property
    def nshells(self) -> int:
        return self._shell.nshells

    @property
    def is_leader(self) -> bool:
        return self._shell.is_leader

    @property
    def ntasks(self) -> int:
        return self._shell.ntasks

    @property
    def nlocal(self) -> int:
        return self._shell.nlocal

    @property
    def task_ranks(self) -> Sequence[int]:
        return self._shell.task_ranks

    @property
    def tasks(self) -> tuple:
        return tuple(self._shell.tasks)

    @property
    def hostname(self) -> str:
        return self._shell.hostname

    @property
    def service(self) -> str:
        """The job's shell service, served by the leader."""
        return self._shell.service

    @property
    def options(self) -> Mapping:
        return self._options

    @property
    def jobspec(self) -> dict:
        return self._shell.jobspec

    @property
    def command(self) -> list[str]:
        return self._shell.command

    @property
    def arg0(self) -> str:
        return self._shell.arg0

    @property
    def verbose(self) -> int:
        return self._shell.verbose

    @property
    def tmpdir(self) -> str | None:
        return self._shell.tmpdir

    @property
    def critical_ranks(self) -> frozenset[int]:
        return frozenset(self._shell.critical_ranks)

    def mustache_values(self, rank: int | None = None) -> dict[str, str]:
        """Values of the mustache tags ({{id}}, {{taskid}}, ...) for the task of global
        rank `rank` (the job's and node's only when None)."""
        return self._shell.mustache_values(rank)

    def plugin(self, name: str):
        """The loaded plugin called `name`, or None."""
        return self._shell.plugins.find(name)

    # ---------------------------------------------------------------- logging
    def log(self, message: str, level: str = "INFO") -> None:
        """A line in the job's output log (`run` shows flux-shell[RANK]: LEVEL: message)."""
        self._shell.log(message, level)

    def debug(self, message: str, level: int = 1) -> None:
        """A log line shown only with -o verbose=LEVEL or more."""
        self._shell.debug(message, level)

    # -------------------------------------------------------------- eventlogs
    def exec_event(self, name: str, context: dict | None = None) -> None:
        """An entry in the job's exec eventlog."""
        self._shell.exec_event(name, context)

    def append_eventlog(self, name: str, entries: list[dict]) -> None:
        """Entries appended to one of the job's eventlogs: exec, output or input."""
        self._shell.append_eventlog(name, entries)

    # --------------------------------------------------------------- messages
    def rpc(self, topic: str, payload=None, *, nodeid: int | None = None,
            streaming: bool = False):
        """A request to a broker service; the pending RPC (await `.get()`, or set its
        `on_response`, `cancel()` a stream)."""
        kw = {} if nodeid is None else {"nodeid": nodeid}
        return self._shell.h.rpc(topic, payload, streaming=streaming, **kw)

    async def call_leader(self, method: str, payload: dict) -> dict:
        """Call a method of the job's shell service, on the leader; its answer."""
        return await self._shell.call_leader(method, payload)

    def send_leader(self, method: str, payload: dict) -> None:
        """A request to the leader's shell service that wants no answer."""
        self._shell.send_leader(method, payload)

    def respond(self, msg, payload=None) -> None:
        """Answer a request a handler kept (returned NO_REPLY for)."""
        self._shell.h.respond(msg, payload)

    def respond_exception(self, msg, exc: FluxliteError) -> None:
        """Refuse a request a handler kept, with a class of the error tree."""
        self._shell.h.respond(msg, None, exc.errnum, exc.message)

    def end_stream(self, msg) -> None:
        """End a streaming request a handler kept: its clean end (EndOfStream)."""
        self._shell.h.respond(msg, None, EndOfStream.default_errnum)

    # ---------------------------------------------------------------- the job
    async def raise_exception(self, etype: str, severity: int, note: str,
                              context: dict | None = None,
                              wait_status: int | None = None) -> None:
        """Raise an exception on the job; a fatal one with `wait_status` makes the job
        finish with that task's status (as Flux's flux_shell_raise_exit_status)."""
        await self._shell.raise_exception(etype, severity, note, context, wait_status)

    def forward_signal(self, signum: int) -> None:
        """Pass a signal the shell received on to its tasks' process groups (tasks that
        start later get it as they start, but SIGCONT and SIGWINCH), then call the
        `shell.signal` callbacks."""
        self._shell.forward_signal(signum)

    def add_output_sink(self, sink) -> None:
        """`sink.add(task, stream, data, eof)` gets what the tasks write; `sink.flush()`
        is called before the shell exits."""
        self._shell.output_sinks.append(sink)

    def subscribe(self, topic: str, callback: Callable) -> None:
        """Call `callback` on `topic` (a plugin topic, plugin.py) after its hooks."""
        owner = getattr(getattr(callback, "__self__", None), "name", None) or \
            getattr(callback, "__qualname__", "callback")
        self._shell.plugins.subscribe(topic, callback, owner)

    def spawn(self, coro):
        """Run a coroutine owned by the shell (its failure is logged, never lost)."""
        return self._shell.spawn(coro)
