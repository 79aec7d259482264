"""`flux.job.info`: JobInfo, a job as job-list reports it (fluxlite's job-list
topics answer in Flux's shape: fluxlite.job.joblist), with Flux's computed
fields: state, state_single, result, result_abbrev, status, status_abbrev,
returncode, runtime, t_remaining, username, exception, and the rest as
job-list gives them (defaults for those it left out)."""

from __future__ import annotations

import os
import pwd
import time

from fluxlite.job.joblist import RESULT_BITS, STATE_BITS

_STATE = {bit: name for name, bit in STATE_BITS.items()}
_RESULT = {bit: name for name, bit in RESULT_BITS.items()}
_STATE_ABBREV = {"NEW": "N", "DEPEND": "D", "PRIORITY": "P", "SCHED": "S", "RUN": "R",
                 "CLEANUP": "C", "INACTIVE": "I"}
_RESULT_ABBREV = {"COMPLETED": "CD", "FAILED": "F", "CANCELED": "CA", "TIMEOUT": "TO"}

_DEFAULTS = {"t_depend": 0.0, "t_priority": 0.0, "t_sched": 0.0, "t_run": 0.0,
             "t_cleanup": 0.0, "t_inactive": 0.0, "duration": 0.0, "expiration": 0.0,
             "name": "", "cwd": "", "queue": "", "project": "", "bank": "", "ntasks": "",
             "ncores": "", "nnodes": "", "priority": "", "ranks": "", "nodelist": "",
             "success": "", "waitstatus": "", "dependencies": [], "annotations": {}}


class ExceptionInfo:
    """A job's exception: occurred, severity, type, note ("" when none)."""

    def __init__(self, occurred, severity, type_, note):
        self.occurred, self.severity, self.type, self.note = occurred, severity, type_, note


class JobInfo:
    """JobInfo(job-list entry): the entry's fields as attributes, `id` a JobID."""

    def __init__(self, info: dict):
        from . import JobID
        fields = {**_DEFAULTS, **info}
        fields["id"] = JobID(fields["id"])
        self.state_id = fields.pop("state", 0)
        self.result_id = fields.pop("result", 0)
        self.exception = ExceptionInfo(fields.get("exception_occurred", ""),
                                       fields.get("exception_severity", ""),
                                       fields.get("exception_type", ""),
                                       fields.get("exception_note", ""))
        self._fields = fields

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._fields[name]
        except KeyError:
            raise AttributeError(f"invalid JobInfo attribute '{name}'") from None

    @property
    def state(self) -> str:
        return _STATE.get(self.state_id, "")

    @property
    def state_single(self) -> str:
        return _STATE_ABBREV.get(self.state, "")

    @property
    def result(self) -> str:
        return _RESULT.get(self.result_id, "")

    @property
    def result_abbrev(self) -> str:
        return _RESULT_ABBREV.get(self.result, "")

    @property
    def status(self) -> str:
        """The result of an inactive job, else its state (RUN, SCHED...)."""
        return self.result if self.state == "INACTIVE" else self.state

    @property
    def status_abbrev(self) -> str:
        return self.result_abbrev if self.state == "INACTIVE" else self.state_single

    @property
    def username(self) -> str:
        try:
            return pwd.getpwuid(self.userid).pw_name
        except (KeyError, AttributeError):
            return str(self._fields.get("userid", ""))

    @property
    def runtime(self) -> float:
        if self.t_cleanup > 0 and self.t_run > 0:
            return self.t_cleanup - self.t_run
        return time.time() - self.t_run if self.t_run > 0 else 0.0

    @property
    def t_remaining(self) -> float:
        if self.state != "RUN" or not self.expiration:
            return 0.0
        return max(0.0, self.expiration - time.time())

    @property
    def returncode(self):
        """The highest task exit code, -signal if killed by one, -128 for a job
        canceled before it ran, 1 for one that failed before it ran, "" while active."""
        status = self.waitstatus
        if not isinstance(status, int):
            return -128 if self.result == "CANCELED" else 1 if self.result == "FAILED" else ""
        if os.WIFSIGNALED(status):
            return -os.WTERMSIG(status)
        return os.WEXITSTATUS(status)

    def to_dict(self, filtered: bool = True) -> dict:
        out = {k: v for k, v in self._fields.items()
               if not filtered or k == "duration" or v not in ("", None, 0.0, [], {})}
        out.update(id=int(self.id), jobid=self.id.f58, state=self.state,
                   result=self.result, status=self.status, returncode=self.returncode,
                   runtime=self.runtime,
                   exception={"occurred": bool(self.exception.occurred),
                              "severity": self.exception.severity,
                              "type": self.exception.type, "note": self.exception.note})
        return out

    def __repr__(self) -> str:
        return f"JobInfo(id={self.id.f58}, status={self.status})"
