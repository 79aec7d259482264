"""`flux.job` over fluxlite.job: JobspecV1 (fluxlite.job.Jobspec), JobID, submit,
submit_async, wait, result, event_watch, event_wait, cancel, kill, job_list,
JobList, JournalConsumer (fluxlite.jobapi.journal) and FluxExecutor
(fluxlite.jobapi.Executor).  A name outside that surface
raises NotImplementedError naming it."""

from __future__ import annotations

import collections
import collections.abc
import json
import signal as _signal

from fluxlite.errors import FluxliteError, UsageError
from fluxlite.job import Jobspec as _Jobspec
from fluxlite.job.joblist import STATE_BITS  # noqa: F401  (as Flux's flux.job has it)
from fluxlite.jobapi import api
from fluxlite.util import fluid

from .. import _handle, missing
from ..core.handle import RPC
from ..core.inner import ffi  # noqa: F401  (flux.job.ffi, as Flux exports it)
from . import rfc14

__all__ = ["Jobspec", "JobspecV1", "JobID", "submit", "submit_async", "submit_get_id",
           "wait", "result",
           "event_watch", "event_wait", "cancel", "cancel_async", "kill", "kill_async",
           "job_list", "job_list_inactive", "job_list_id", "JobList", "JobInfo",
           "FluxExecutor", "FluxExecutorFuture",
           "JobEventWatchFuture", "event_watch_async", "EventLogEvent", "JobException",
           "JournalConsumer", "JournalEvent", "SENTINEL_EVENT", "wait_async",
           "result_async", "get_job", "job_kvs", "job_kvs_guest", "timeleft"]


_BUILT = object()


class Jobspec(_Jobspec):
    """Flux's canonical jobspec (RFC 14, any version): built from its parts, or
    from YAML (from_yaml_stream, from_yaml_file), its shape checked at once
    (TypeError, ValueError); iterated, it yields its resources depth first.
    The builders and setters are fluxlite.job.Jobspec's, with Flux's spellings
    `input`/`output`/`error` beside `stdin`/`stdout`/`stderr`."""

    input = _Jobspec.stdin
    output = _Jobspec.stdout
    error = _Jobspec.stderr

    def __init__(self, resources, tasks, attributes=_BUILT, version=1):
        if attributes is _BUILT:     # fluxlite's builders give none: a new jobspec
            attributes = {"system": {"duration": 0.0}}
        rfc14.check(resources, tasks, attributes, version)
        self.jobspec = {"resources": resources, "tasks": tasks,
                        "attributes": attributes, "version": version}

    @classmethod
    def from_yaml_stream(cls, yaml_stream):
        """A jobspec from YAML (or JSON) text or an open file."""
        import yaml
        obj = yaml.safe_load(yaml_stream)
        if not isinstance(obj, dict):
            raise TypeError("a jobspec must be a mapping")
        rfc14.keys(rfc14.TOP_LEVEL_KEYS, obj.keys())
        return cls(**obj)

    @classmethod
    def from_yaml_file(cls, filename):
        with open(filename, "rb") as f:
            return cls.from_yaml_stream(f)

    def __iter__(self):
        return (res for _, res, _ in rfc14.walk(self.resources))

    def resource_walk(self):
        """(parent, resource, count) depth first, each count multiplied by its
        ancestors' (a slot of 2 with 4 cores: 2 slots, 8 cores)."""
        return rfc14.walk(self.resources)

    def resource_counts(self) -> dict:
        """How many of each resource type the jobspec asks for, in all."""
        counts = collections.defaultdict(int)
        for _, res, count in rfc14.walk(self.resources):
            counts[res["type"]] += count
        return counts

    def __getattr__(self, name):
        raise missing(f"flux.job.{type(self).__name__}", name)


class JobspecV1(Jobspec):
    """A version-1 jobspec, what Flux's and fluxlite's job-manager run.
    from_command/from_nest_command/from_batch_command take Flux's options:
    `env_expand` (the env-expand shell option: values rendered with the job's
    {{tmpdir}}, {{id}}... in each task's environment), `label_io`, `unbuffered`,
    `queue`, `bank`, `rlimits`, and `output="kvs"`/`"none"` (the output stays in
    the job's log, fluxlite's default)."""

    def __init__(self, resources, tasks, attributes=_BUILT, version=1):
        if version != 1:
            raise ValueError("version must be 1")
        super().__init__(resources, tasks, attributes, version)

    @classmethod
    def from_command(cls, command, num_tasks=1, cores_per_task=1, gpus_per_task=None,
                     num_nodes=None, exclusive=False, duration=None, environment=None,
                     env_expand=None, cwd=None, rlimits=None, name=None, input=None,
                     output=None, error=None, label_io=False, unbuffered=False, queue=None,
                     bank=None, **kwargs):
        output = None if output in ("kvs", "none") else output
        error = None if error in ("kvs", "none") else error
        # as Flux's builder: the shape is checked now, the rest at submit
        kwargs["validate"] = False
        spec = super().from_command(command, num_tasks, cores_per_task, gpus_per_task,
                                    num_nodes, exclusive, duration, environment, cwd,
                                    rlimits, name, input, output, error, **kwargs)
        spec._flux_options(env_expand, label_io, unbuffered, queue, bank)
        return spec

    @classmethod
    def from_nest_command(cls, command, num_slots=1, cores_per_slot=1, gpus_per_slot=None,
                          num_nodes=None, broker_opts=None, exclusive=False, conf=None,
                          env_expand=None, label_io=False, unbuffered=False, queue=None,
                          bank=None, **kwargs):
        spec = super().from_nest_command(command, num_slots, cores_per_slot, gpus_per_slot,
                                         num_nodes, broker_opts, exclusive, conf, **kwargs)
        spec._flux_options(env_expand, label_io, unbuffered, queue, bank)
        return spec

    def _flux_options(self, env_expand, label_io, unbuffered, queue, bank) -> None:
        if env_expand:
            if not isinstance(env_expand, collections.abc.Mapping):
                raise TypeError("env_expand must be a mapping")
            self.setattr_shell_option("env-expand", dict(env_expand))
        if label_io:
            self.setattr_shell_option("output.stdout.label", True)
            self.setattr_shell_option("output.stderr.label", True)
        if unbuffered:
            self.setattr_shell_option("output.stdout.buffer.type", "none")
            self.setattr_shell_option("output.stderr.buffer.type", "none")
        if queue is not None:
            self.setattr("system.queue", queue)
        if bank is not None:
            self.setattr("system.bank", bank)

    @classmethod
    def per_resource(cls, *args, **kwargs):
        raise missing("flux.job.JobspecV1", "per_resource")


class JobID(int):
    """A job id from any of Flux's forms (decimal, f58, hex, dothex, kvs path, mnemonic
    words, emoji) or an int; `.dec`, `.f58`, `.f58plain`, `.hex`, `.dothex`, `.kvs`,
    `.words`, `.emoji` (or `encode(NAME)`); str() is the f58 form, `orig` the text
    it was made from (a JobID made from a JobID keeps the first one's)."""

    def __new__(cls, value):
        if isinstance(value, JobID):
            return cls(value.orig)
        if isinstance(value, bytes):
            value = value.decode()
        number = value
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("job."):   # the KVS directory form: job.DOTHEX
                text = text[4:]
            try:
                number = fluid.parse(text)
            except (FluxliteError, ValueError):
                raise ValueError(f"{value} is not a valid Flux jobid") from None
        self = super().__new__(cls, int(number))
        self._orig = str(value)
        return self

    @property
    def orig(self) -> str:
        return self._orig

    def encode(self, encoding: str = "dec") -> str:
        """This id in one of Flux's encodings (dec, hex, dothex, kvs, f58, f58plain,
        words, emoji)."""
        if encoding not in ("dec", "hex", "dothex", "kvs", "f58", "f58plain", "words",
                            "emoji"):
            raise ValueError(f"unknown job id encoding {encoding!r}")
        return getattr(self, encoding)

    dec = property(lambda self: str(int(self)))
    f58 = property(lambda self: fluid.f58(int(self)))
    f58plain = property(lambda self: fluid.f58_plain(int(self)))
    hex = property(lambda self: f"{int(self):#x}")
    dothex = property(lambda self: fluid.dothex(int(self)))
    kvs = property(lambda self: "job." + fluid.dothex(int(self)))
    words = property(lambda self: fluid.words(int(self)))
    emoji = property(lambda self: fluid.emoji(int(self)))

    def __str__(self) -> str:
        return self.f58

    def __repr__(self) -> str:
        return f"JobID({int(self)})"


def _id(jobid) -> int:
    return int(JobID(jobid))


def _spec(jobspec):
    if isinstance(jobspec, _Jobspec):
        return jobspec.jobspec
    if isinstance(jobspec, (str, bytes)):
        return json.loads(jobspec)
    return jobspec


def _flux(flux_handle):
    """A flux.Flux for the handle given (a fluxlite Handle gets one around it)."""
    from .. import Flux
    if flux_handle is None:
        raise UsageError("no handle given (flux.Flux() makes one)")
    return flux_handle if isinstance(flux_handle, Flux) else Flux(handle=flux_handle)


def submit(flux_handle, jobspec, urgency: int = 16, waitable: bool = False,
           debug: bool = False, pre_hold: bool = False) -> JobID:
    """Submit a JobspecV1 (or its dict or JSON text); the job's id.  Every fluxlite
    job may be waited on, so `waitable` changes nothing."""
    return submit_async(flux_handle, jobspec, urgency, waitable, debug, pre_hold).get_id()


class SubmitFuture(RPC):
    """What submit_async returns: get_id() (also get()) waits for the job's id;
    then() runs a callback from the reactor once it is there."""

    def get_id(self) -> JobID:
        return JobID(self._result()["id"])

    get = get_id


def submit_get_id(future) -> JobID:
    """The id a submit_async future gives (OSError(EINVAL) for no future)."""
    if future is None:
        raise UsageError("submit_get_id: no future given")
    return future.get_id()


def submit_async(flux_handle, jobspec, urgency: int = 16, waitable: bool = False,
                 debug: bool = False, pre_hold: bool = False) -> SubmitFuture:
    """Send a job-manager.submit for a JobspecV1 (or its dict or JSON text).  Every
    fluxlite job may be waited on, so `waitable` changes nothing."""
    if flux_handle is None:
        raise UsageError("submit: no handle given")
    if debug or pre_hold:
        raise NotImplementedError("flux.job.submit(debug=/pre_hold=): not in fluxlite")
    topic, payload = api.submit_request(_spec(jobspec), urgency)
    return SubmitFuture(_flux(flux_handle).rpc(topic, payload))


def wait(flux_handle, jobid=None, timeout: float | None = None):
    """Wait for a job (or, with no id, any job) to end: (jobid, success, errstr),
    also as `.jobid`, `.success`, `.errstr`."""
    h = _handle(flux_handle)
    res = api.wait_any(h, timeout=timeout) if jobid is None else \
        api.wait(h, _id(jobid), timeout=timeout)
    return JobWaitResult(JobID(res["id"]), bool(res["success"]), res.get("errstr", ""))


def cancel(flux_handle, jobid, reason: str | None = None) -> None:
    api.cancel(_handle(flux_handle), _id(jobid), reason or "")


def kill(flux_handle, jobid, signum: int | None = None) -> None:
    api.kill(_handle(flux_handle), _id(jobid), signum or int(_signal.SIGTERM))


class _Done:
    """A future already resolved: what the *_async calls here return."""

    def __init__(self, fn):
        self._fn = fn

    def get(self):
        return self._fn()

    def wait_for(self, timeout: float = -1.0):
        return self


def cancel_async(flux_handle, jobid, reason: str | None = None) -> _Done:
    h, j = _handle(flux_handle), _id(jobid)
    p = h.rpc(*api.cancel_request(j, reason or ""))
    return _Done(lambda: (h.wait(p), p.take(), None)[-1])


def kill_async(flux_handle, jobid, signum: int | None = None) -> _Done:
    return _Done(lambda: kill(flux_handle, jobid, signum))


from .event import (  # noqa: E402,F401
    MAIN_EVENTS,
    EventLogEvent,
    JobEventWatchFuture,
    JobException,
    event_wait,
    event_watch,
    event_watch_async,
)
from .executor import FluxExecutor, FluxExecutorFuture  # noqa: E402,F401
from .info import JobInfo  # noqa: E402,F401
from .journal import SENTINEL_EVENT, JournalConsumer, JournalEvent  # noqa: E402
from .list import (  # noqa: E402,F401
    JobList,
    JobListIdRPC,
    JobListRPC,
    get_job,
    job_list,
    job_list_id,
    job_list_inactive,
)
from .output import (  # noqa: E402,F401
    job_output,
    output_event_watch,
    output_event_watch_async,
    output_watch,
    output_watch_async,
    output_watch_lines,
    output_watch_lines_async,
)
from .result import (  # noqa: E402,F401
    JobResultFuture,
    JobWaitFuture,
    JobWaitResult,
    job_kvs,
    job_kvs_guest,
    result,
    result_async,
    timeleft,
    wait_async,
)


def __getattr__(name):
    raise missing("flux.job", name)

