"""`flux.job.list`: the job-list RPCs (job_list, job_list_inactive, job_list_id)
and their futures, and JobList."""

from __future__ import annotations

import errno
import os

from ..constants import FLUX_JOB_STATE_INACTIVE, FLUX_USERID_UNKNOWN
from ..core.handle import RPC
from .info import JobInfo

__all__ = ["JobList", "job_list", "job_list_inactive", "job_list_id", "JobListRPC",
           "JobListIdRPC", "get_job"]


class JobListRPC(RPC):
    """job-list.list's future: get_jobs() (dicts), get_jobinfos() (JobInfo)."""

    def get_jobs(self) -> list:
        jobs = []
        while True:
            try:
                resp = self.get()
            except OSError as exc:
                if exc.errno == errno.ENODATA:
                    return jobs
                raise
            jobs.extend(resp["jobs"])
            if not resp.get("version"):    # one response holds them all
                return jobs
            self.reset()

    def get_jobinfos(self):
        for job in self.get_jobs():
            yield JobInfo(job)


class JobListIdRPC(RPC):
    """job-list.list-id's future: get_job() (a dict), get_jobinfo() (JobInfo)."""

    def get_job(self) -> dict:
        return self.get()["job"]

    def get_jobinfo(self) -> JobInfo:
        return JobInfo(self.get_job())


def job_list(flux_handle, max_entries: int = 1000, attrs=("all",), userid=None, states=0,
             results=0, since: float = 0.0, name=None, queue=None, constraint=None):
    """The caller's jobs (userid=FLUX_USERID_UNKNOWN: everyone's) that meet the
    filters, as job-list gives them: an RFC 31 constraint built from the arguments
    and'ed with `constraint`."""
    conds = [constraint] if constraint is not None else []
    userid = os.getuid() if userid is None else userid
    if userid != FLUX_USERID_UNKNOWN:
        conds.append({"userid": [userid]})
    if name:
        conds.append({"name": [name]})
    if queue:
        conds.append({"queue": [queue] if isinstance(queue, str) else list(queue)})
    if states and results:
        conds.append({"or": [{"states": [states]}, {"results": [results]}]})
    elif states:
        conds.append({"states": [states]})
    elif results:
        conds.append({"results": [results]})
    payload = {"max_entries": int(max_entries), "attrs": list(attrs or []),
               "since": since, "constraint": {"and": conds}}
    return JobListRPC(flux_handle.rpc("job-list.list", payload))


def job_list_inactive(flux_handle, since: float = 0.0, max_entries: int = 1000,
                      attrs=("all",), name=None, queue=None, constraint=None):
    """Everyone's inactive jobs, newest first, that became inactive after `since`."""
    return job_list(flux_handle, max_entries=max_entries, attrs=attrs,
                    userid=FLUX_USERID_UNKNOWN, states=FLUX_JOB_STATE_INACTIVE, since=since,
                    name=name, queue=queue, constraint=constraint)


def job_list_id(flux_handle, jobid, attrs=("all",)) -> JobListIdRPC:
    from . import JobID
    return JobListIdRPC(flux_handle.rpc("job-list.list-id",
                                        {"id": int(JobID(jobid)), "attrs": list(attrs or [])}))


def get_job(flux_handle, jobid):
    """The job's job-list record as a dict (JobInfo.to_dict, every field), or
    None for a job the instance does not know."""
    try:
        info = job_list_id(flux_handle, jobid).get_jobinfo()
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise
    return info.to_dict(filtered=False)


from . import JobList  # noqa: E402,F401  (flux.job.list.JobList, as in Flux)
