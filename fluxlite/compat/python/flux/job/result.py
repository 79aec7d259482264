"""`flux.job.wait` and `flux.job.result` as futures: wait_async (the
job-manager's wait, which uses a job up as `flux job wait` does) and
result_async (a job's outcome once it is inactive, read from job-list after its
eventlog ends: it uses nothing up); job_kvs/job_kvs_guest (a job's KVS
directory) and timeleft (what the enclosing job has left of its time limit)."""

from __future__ import annotations

import math
import os
import time
from collections import namedtuple

from fluxlite.errors import FluxliteError, UsageError
from fluxlite.job import states
from fluxlite.job.joblist import STATE_BITS

from ..core.handle import RPC
from ..future import FutureExt
from .info import JobInfo

JobWaitResult = namedtuple("JobWaitResult", ["jobid", "success", "errstr"])


class JobWaitFuture(RPC):
    """wait_async's future: get_status() (also get()) is (jobid, success, errstr)."""

    def get_status(self) -> JobWaitResult:
        from . import JobID
        resp = self._result()
        return JobWaitResult(JobID(resp["id"]), bool(resp["success"]),
                             resp.get("errstr", ""))

    get = get_status


def wait_async(flux_handle, jobid=None) -> JobWaitFuture:
    """Wait for a job (or, with no id, any of the caller's jobs) to end."""
    from . import _flux, _id
    payload = {} if jobid is None else {"id": _id(jobid)}
    return JobWaitFuture(_flux(flux_handle).rpc("job-manager.wait", payload))


class JobResultFuture(FutureExt):
    """result_async's future: get_info() (also get()) is the job's JobInfo once
    it is inactive; get_dict() its to_dict()."""

    def get_info(self) -> JobInfo:
        return JobInfo(self._result())

    get = get_info

    def get_dict(self) -> dict:
        return self.get_info().to_dict()


def result_async(flux_handle, jobid, attrs=("all",)) -> JobResultFuture:
    """The job's outcome (its job-list record) once its main eventlog has ended."""
    from . import _flux, _id
    from .event import event_watch_async
    fh, jid = _flux(flux_handle), _id(jobid)

    def fetch(future):
        fh.rpc("job-list.list-id", {"id": jid, "attrs": list(attrs)}).then(
            lambda f: _fulfill(future, f))

    def _fulfill(future, rpc):
        try:
            future.fulfill(rpc.get()["job"])
        except FluxliteError as exc:
            future.fulfill_error(exc.errnum, exc.message)

    def on_event(watch, future):
        try:
            event = watch.get_event()
        except FluxliteError as exc:
            future.fulfill_error(exc.errnum, exc.message)
            return
        if event is None or event.name == "clean":
            watch.cancel(stop=True)
            fetch(future)

    def init(future):
        try:
            watch = event_watch_async(fh, jid)
            # an inner link of this future: it runs during a blocking get too
            watch.pimpl.reactor_only = False
            watch.then(on_event, future)
        except FluxliteError as exc:
            future.fulfill_error(exc.errnum, exc.message)

    return JobResultFuture(init, flux_handle=fh)


def result(flux_handle, jobid, timeout: float | None = None) -> JobInfo:
    """The job's JobInfo once it is inactive (result_async, waited for)."""
    return result_async(flux_handle, jobid).wait_for(
        -1.0 if timeout is None else timeout).get_info()


def job_kvs(flux_handle, jobid):
    """The job's KVS directory (job.XXXX.XXXX.XXXX.XXXX) as a KVSDir."""
    from ..kvs import KVSDir
    from . import JobID, _flux
    return KVSDir(_flux(flux_handle), JobID(jobid).kvs)


def job_kvs_guest(flux_handle, jobid):
    """The job's guest directory (its exec eventlog, output, input); inside a job,
    where $FLUX_KVS_NAMESPACE names the guest namespace, that namespace's root, as
    Flux's."""
    from fluxlite.util.compat import kvs_namespace

    from ..kvs import KVSDir
    from . import JobID, _flux
    if kvs_namespace() is not None:
        return KVSDir(_flux(flux_handle))
    return KVSDir(_flux(flux_handle), JobID(jobid).kvs + ".guest")


def timeleft(flux_handle=None) -> float:
    """Seconds the enclosing job has left (inf with no limit, 0 once it ended);
    OSError(EINVAL) outside a job."""
    from .. import Flux
    from . import _flux
    text = os.environ.get("FLUX_JOB_ID") or os.environ.get("FLUXLITE_JOB_ID")
    if not text:
        raise UsageError("timeleft: not in a job (no FLUX_JOB_ID)")
    from . import JobID
    fh = _flux(flux_handle) if flux_handle is not None else Flux()
    job = fh.rpc("job-list.list-id", {"id": int(JobID(text)),
                                      "attrs": ["state", "expiration"]}).get()["job"]
    if job.get("state") not in (STATE_BITS[states.RUN], STATE_BITS[states.CLEANUP]):
        return 0.0
    expiration = job.get("expiration") or 0.0
    return math.inf if not expiration else max(0.0, expiration - time.time())
