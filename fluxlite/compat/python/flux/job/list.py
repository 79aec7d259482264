"""`flux.job.list`: the job-list RPCs (job_list, job_list_inactive, job_list_id)
and their futures, and JobList over them (the service filters; nothing is
filtered here)."""

from __future__ import annotations

import errno
import os
import pwd

from .. import constants as C
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


class JobList:
    """Flux's JobList: the jobs job-list.list answers for a query built from
    `filters` (state and result names: pending, running, inactive, completed,
    failed...), `user` (a name, a uid, or "all"; default the caller), `since`,
    `name`, `queue` and an RFC 31 `constraint`; with `ids`, those jobs only
    (job-list.list-id each, an unknown one noted in `errors`).  jobs() gives
    JobInfo objects."""

    STATES = {"depend": C.FLUX_JOB_STATE_DEPEND, "priority": C.FLUX_JOB_STATE_PRIORITY,
              "sched": C.FLUX_JOB_STATE_SCHED, "run": C.FLUX_JOB_STATE_RUN,
              "cleanup": C.FLUX_JOB_STATE_CLEANUP, "inactive": C.FLUX_JOB_STATE_INACTIVE,
              "pending": C.FLUX_JOB_STATE_PENDING, "running": C.FLUX_JOB_STATE_RUNNING,
              "active": C.FLUX_JOB_STATE_ACTIVE}
    RESULTS = {"completed": C.FLUX_JOB_RESULT_COMPLETED, "failed": C.FLUX_JOB_RESULT_FAILED,
               "canceled": C.FLUX_JOB_RESULT_CANCELED, "timeout": C.FLUX_JOB_RESULT_TIMEOUT}

    def __init__(self, flux_handle, attrs=("all",), filters=(), ids=(), user=None,
                 max_entries: int = 1000, since: float = 0.0, name=None, queue=None,
                 constraint=None):
        from . import JobID
        self.handle = flux_handle
        self.attrs = list(attrs)
        self.states = self.results = 0
        self.max_entries, self.since = max_entries, since
        self.name, self.queue, self.constraint = name, queue, constraint
        self.ids = [JobID(i) for i in ids] if ids else None
        self.errors: list[str] = []
        for f in filters:
            for word in f.split(","):
                self.add_filter(word)
        self.set_user(user)

    def set_user(self, user) -> None:
        """Jobs of `user` (a name, a uid, or "all"; None: the caller)."""
        if user is None:
            self.userid = os.getuid()
        elif user == "all":
            self.userid = FLUX_USERID_UNKNOWN
        else:
            try:
                self.userid = pwd.getpwnam(user).pw_uid
            except KeyError:
                try:
                    self.userid = int(user)
                except ValueError:
                    raise ValueError(f"Invalid user {user} specified") from None

    def add_filter(self, fname: str) -> None:
        """Add a state or result name to what the jobs may be."""
        word = fname.strip().lower()
        if word in self.STATES:
            self.states |= self.STATES[word]
        elif word in self.RESULTS:
            self.results |= self.RESULTS[word]
        else:
            raise ValueError(f"Invalid filter specified: {fname}")

    def jobs(self) -> list[JobInfo]:
        if self.ids is None:
            found = job_list(self.handle, max_entries=self.max_entries, attrs=self.attrs,
                             userid=self.userid, states=self.states, results=self.results,
                             since=self.since, name=self.name, queue=self.queue,
                             constraint=self.constraint).get_jobs()
            return [JobInfo(job) for job in found]
        self.errors = []
        out = []
        for jobid in self.ids:
            try:
                out.append(job_list_id(self.handle, jobid, self.attrs).get_jobinfo())
            except OSError as exc:
                self.errors.append(f"JobID {jobid.f58}: " + (
                    "unknown job" if exc.errno == errno.ENOENT else str(exc)))
        return out
