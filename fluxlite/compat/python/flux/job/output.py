"""`flux.job.output`: a job's standard output and error from its RFC 24 output
eventlog (`data` entries: stream, rank, data or eof): job_output (all of it,
once the job has written it), output_event_watch (the entries as they come),
output_watch (stream, data) and output_watch_lines (stream, line), each with an
_async form whose future is read from the reactor.  A job that ended before it
started has no output: OSError(EIO) `job ID never started`, after a stderr
message naming its exception.  An unknown job is FileNotFoundError."""

from __future__ import annotations

import errno
from typing import NamedTuple

from fluxlite.errors import FluxliteError
from fluxlite.jobapi import api
from fluxlite.util import idset as _idset

from .event import EventLogEvent, JobEventWatchFuture, JobException, event_watch_async

__all__ = ["job_output", "output_event_watch", "output_event_watch_async", "output_watch",
           "output_watch_async", "output_watch_lines", "output_watch_lines_async",
           "JobOutput", "OutputEvent", "Taskset", "LOG_QUIET", "LOG_TRACE"]

LOG_QUIET, LOG_FATAL, LOG_ERROR, LOG_WARN, LOG_NOTICE, LOG_DEBUG, LOG_TRACE = \
    -1, 0, 3, 4, 5, 6, 7


class Taskset:
    """The tasks an output entry is from (an idset, or `*` for all)."""

    def __init__(self, tasks):
        self.all = tasks in ("*", "all", None)
        self.ids = [] if self.all else sorted(_idset.decode(str(tasks)))

    def __str__(self) -> str:
        return "*" if self.all else _idset.encode(self.ids)


_LEVELS = {0: "FATAL", 1: "ALERT", 2: "CRIT", 3: "ERROR", 4: "WARN", 5: "NOTICE",
           6: "DEBUG", 7: "TRACE"}
_LEVEL_NUMBERS = {"FATAL": 0, "EMERG": 0, "ALERT": 1, "CRIT": 2, "ERROR": 3, "ERR": 3,
                  "WARN": 4, "WARNING": 4, "NOTICE": 5, "INFO": 5, "DEBUG": 6, "TRACE": 7}


class OutputEvent(EventLogEvent):
    """An output entry: `.stream`, `.rank` (Taskset), `.data` (None at eof); a
    shell's `log` entry also has `.level`, `.message` and render()."""

    def __init__(self, entry, labelio: bool = False):
        super().__init__(entry)
        ctx = self.context
        self.stream = ctx.get("stream")
        self.rank = Taskset(ctx.get("rank"))
        self.data = ctx.get("data")
        self.eof = bool(ctx.get("eof"))
        level = ctx.get("level", 5)
        self.level = _LEVEL_NUMBERS.get(str(level).upper(), 5) if isinstance(level, str) \
            else int(level)
        self.message = ctx.get("message", "")
        self.component = ctx.get("component", "")
        if labelio and self.data:
            self.data = "".join(f"{self.rank}: {line}"
                                for line in self.data.splitlines(keepends=True))


    def render(self) -> str:
        """A log entry as a line: `flux-shell[RANK]: LEVEL: message`."""
        comp = f"{self.component}: " if self.component else ""
        level = _LEVELS.get(self.level, str(self.level))
        return f"flux-shell[{self.rank}]: {level}: {comp}{self.message}\n"


def _pieces(event: OutputEvent, tasks, log_stderr_level: int):
    """(stream, text) an entry gives: its data, a log line on stderr (at or below
    log_stderr_level) or on the `log` stream, a line on stderr for a redirect."""
    if event.name == "data" and event.data and _wanted(event, tasks):
        return [(event.stream, event.data)]
    if event.name == "log":
        return [("stderr" if event.level <= log_stderr_level else "log", event.render())]
    if event.name == "redirect":     # a stream that went to a file instead
        ctx = event.context
        return [("stderr", f"{event.rank}: {ctx.get('stream')} redirected to "
                           f"{ctx.get('path')}\n")]
    return []


class JobOutput(NamedTuple):
    stdout: str
    stderr: str
    log: str


def _never_started(h, jobid) -> tuple[str, OSError]:
    """The stderr message and the error for a job that ended before it started."""
    from . import JobID
    note = ""
    for e in api.event_watch(h, int(jobid), follow=False):
        if e.get("name") == "exception" and (e.get("context") or {}).get("severity") == 0:
            note = str(JobException(EventLogEvent(e))) + "\n"
    return note, OSError(errno.EIO, f"job {JobID(jobid)} never started")


class JobOutputEventWatch(JobEventWatchFuture):
    """The output eventlog's watch: get_event() is the next OutputEvent (None at
    the end); OSError(EIO) for a job that never started."""

    def __init__(self, flux_handle, jobid, labelio: bool = False):
        super().__init__(flux_handle, int(jobid), "output")
        self._jobid, self._labelio = jobid, labelio

    def get_event(self, autoreset: bool = True):
        try:
            e = super().get_event(autoreset)
        except FileNotFoundError:
            raise _never_started(self.get_flux().handle, self._jobid)[1] from None
        return None if e is None else OutputEvent(e, self._labelio)

    get = get_event


def _written(h, jobid) -> list | None:
    """The output entries the job has logged so far (None: no output log yet)."""
    try:
        return list(api.event_watch(h, int(jobid), "output", follow=False))
    except FluxliteError:
        return None


def output_event_watch_async(flux_handle, jobid, labelio: bool = False,
                             nowait: bool = False) -> JobOutputEventWatch:
    """Watch the job's output eventlog; with nowait, FileNotFoundError if the job
    has written none yet."""
    from . import _flux
    fh = _flux(flux_handle)
    if nowait and _written(fh.handle, jobid) is None:
        raise FileNotFoundError(errno.ENOENT, f"job {jobid}: no output yet")
    return JobOutputEventWatch(fh, jobid, labelio)


def output_event_watch(flux_handle, jobid, labelio: bool = False, nowait: bool = False):
    """Yield the job's OutputEvents as they are logged, until its output ends."""
    if nowait:
        from . import _handle
        if _written(_handle(flux_handle), jobid) is None:
            raise FileNotFoundError(errno.ENOENT, f"job {jobid}: no output yet")
    watch = output_event_watch_async(flux_handle, jobid, labelio)
    while (event := watch.get_event()) is not None:
        yield event


def _wanted(event: OutputEvent, tasks) -> bool:
    if tasks in ("*", None) or event.rank.all:
        return True
    return bool(set(event.rank.ids) & _idset.decode(str(tasks)))


def output_watch(flux_handle, jobid, tasks="*", labelio: bool = False,
                 nowait: bool = False, log_stderr_level: int = LOG_TRACE):
    """Yield (stream, data) for each piece of the job's output as it comes."""
    from . import _handle
    try:
        for event in output_event_watch(flux_handle, jobid, labelio, nowait):
            yield from _pieces(event, tasks, log_stderr_level)
    except OSError as exc:
        if exc.errno == errno.EIO:
            note, _ = _never_started(_handle(flux_handle), jobid)
            if note:
                yield "stderr", note
        raise


def output_watch_lines(flux_handle, jobid, tasks="*", labelio: bool = False,
                       nowait: bool = False, log_stderr_level: int = LOG_TRACE,
                       keepends: bool = False):
    """Yield (stream, line) for each whole line of the job's output."""
    partial: dict[str, str] = {}
    for stream, data in output_watch(flux_handle, jobid, tasks, labelio, nowait,
                                     log_stderr_level):
        text = partial.pop(stream, "") + data
        lines = text.splitlines(keepends=True)
        if lines and not lines[-1].endswith("\n"):
            partial[stream] = lines.pop()
        for line in lines:
            yield stream, line if keepends else line.rstrip("\n")
    for stream, rest in partial.items():
        yield stream, rest


def job_output(flux_handle, jobid, tasks="*", labelio: bool = False, nowait: bool = False,
               log_stderr_level: int = LOG_TRACE) -> JobOutput:
    """All of the job's output (stdout, stderr, log), once it has written it (with
    nowait, what it has written so far; FileNotFoundError if nothing yet).  A job
    that ended before it started raises its JobException."""
    from . import _handle, event_wait
    h = _handle(flux_handle)
    api.info(h, int(jobid))        # FileNotFoundError for an unknown job
    if nowait:
        entries = _written(h, jobid)
        if entries is None:
            raise FileNotFoundError(errno.ENOENT, f"job {jobid}: no output yet")
        events = [OutputEvent(e, labelio) for e in entries]
    else:
        event_wait(flux_handle, jobid, "start")
        events = list(output_event_watch(flux_handle, jobid, labelio))
    out = {"stdout": "", "stderr": "", "log": ""}
    for event in events:
        for stream, text in _pieces(event, tasks, log_stderr_level):
            out[stream] = out.get(stream, "") + text
    return JobOutput(out["stdout"], out["stderr"], out["log"])


def output_watch_async(flux_handle, jobid, tasks="*", labelio: bool = False,
                       nowait: bool = False, log_stderr_level: int = LOG_TRACE):
    return _watch_future(flux_handle, jobid, tasks, labelio, log_stderr_level, lines=False)


def output_watch_lines_async(flux_handle, jobid, tasks="*", labelio: bool = False,
                             nowait: bool = False, log_stderr_level: int = LOG_TRACE,
                             keepends: bool = False):
    return _watch_future(flux_handle, jobid, tasks, labelio, log_stderr_level, lines=True,
                         keepends=keepends)


def _watch_future(flux_handle, jobid, tasks, labelio, log_stderr_level: int, lines: bool,
                  keepends: bool = False):
    """A future fed by the output eventlog's watch: get_output()/getline() give the
    next (stream, data) and reset it; the then-callback runs for each."""
    from ..future import Future, FutureState
    from . import _flux
    fh = _flux(flux_handle)
    state = FutureState(fh)
    state.streaming = state.reactor_only = True
    watch = event_watch_async(fh, jobid, "output")
    partial: dict[str, str] = {}

    def on_event(f):
        try:
            e = f.get_event()
        except FileNotFoundError:
            note, err = _never_started(fh.handle, jobid)
            if note:
                state.fulfill(("stderr", note))
            state.fulfill(None, err.errno, err.strerror)
            state.ended = True
            return
        if e is None:
            for stream, rest in partial.items():
                state.fulfill((stream, rest))
            state.ended = True
            fh._futures.discard(state)
            return
        for stream, data in _pieces(OutputEvent(e, labelio), tasks, log_stderr_level):
            if not lines:
                state.fulfill((stream, data))
                continue
            text = partial.pop(stream, "") + data
            got = text.splitlines(keepends=True)
            if got and not got[-1].endswith("\n"):
                partial[stream] = got.pop()
            for line in got:
                state.fulfill((stream, line if keepends else line.rstrip("\n")))

    watch.then(on_event)
    future = Future(state)

    def next_item():
        item = future._result()
        future.reset()
        return item

    future.get_output = future.getline = next_item
    return future
