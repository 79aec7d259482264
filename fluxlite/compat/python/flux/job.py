"""`flux.job`: JobspecV1 (fluxlite.job.Jobspec), submit, wait, FluxExecutor
(fluxlite.job.Executor)."""

from __future__ import annotations

from types import SimpleNamespace

from fluxlite.job import Jobspec as JobspecV1
from fluxlite.job import api
from fluxlite.job.executor import Executor
from fluxlite.util import fluid

__all__ = ["JobspecV1", "submit", "wait", "FluxExecutor"]


def _spec(jobspec):
    if isinstance(jobspec, JobspecV1):
        return jobspec.jobspec
    if isinstance(jobspec, (str, bytes)):
        import json
        return json.loads(jobspec)
    return jobspec


def submit(flux_handle, jobspec, urgency: int = 16, waitable: bool = False,
           debug: bool = False, pre_hold: bool = False) -> int:
    """Submit a JobspecV1 (or its dict or JSON text); the job's id.  Every fluxlite
    job may be waited on, so `waitable` changes nothing."""
    if debug or pre_hold:
        raise NotImplementedError("flux.job.submit(debug=/pre_hold=): not in fluxlite")
    return api.submit(flux_handle, _spec(jobspec), urgency)


def wait(flux_handle, jobid=None, timeout: float | None = None):
    """Wait for a job (or, with no id, any job) to end: `.jobid`, `.success`, `.errstr`."""
    if jobid is None:
        res = api.wait_any(flux_handle, timeout=timeout)
    else:
        jobid = fluid.parse(jobid) if isinstance(jobid, str) else int(jobid)
        res = api.wait(flux_handle, jobid, timeout=timeout)
    return SimpleNamespace(jobid=res["id"], success=bool(res["success"]),
                           errstr=res.get("errstr", ""))


class FluxExecutor(Executor):
    """fluxlite's Executor with Flux's constructor: the handle's URL is
    `handle_args[0]` or `handle_kwargs["url"]` (default $FLUXLITE_URI)."""

    def __init__(self, threads: int = 1, thread_name_prefix: str = "",
                 poll_interval: float = 0.1, handle_args=(), handle_kwargs=None):
        kwargs = dict(handle_kwargs or {})
        url = handle_args[0] if handle_args else kwargs.pop("url", None)
        if kwargs or len(handle_args) > 1:
            raise NotImplementedError("flux.job.FluxExecutor: handle arguments other "
                                      "than the URL are not in fluxlite")
        super().__init__(url)
