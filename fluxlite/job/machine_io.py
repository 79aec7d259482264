"""The data of the job-manager's per-job machine (actions.py): the events it is
fed (what happened to a job) and the effects it returns (what the service is to
do), as frozen msgspec Structs.  Data only: the machine is actions.py's, the
effects' interpreter the job-manager service's.
"""

from __future__ import annotations

from msgspec import Struct

from . import depend


# ---------------------------------------------------------------- events in
class JobEvent(Struct, frozen=True):
    """What happened to a job: each subclass has its handler in Actions.HANDLERS."""


class Dep(Struct, frozen=True):
    """One of a submitted job's dependencies, with its verdict when it names a job
    (the service knows the other jobs); a begin-time one is judged here, by `at`."""
    desc: str                      # afterok=ƒ..., begin-time=...
    scheme: str
    target: int | None = None      # the job it names
    verdict: str = depend.WAIT     # MET, WAIT or NEVER
    why: str = ""
    at: float = 0.0                # begin-time: seconds since the epoch


class Submitted(JobEvent):
    """A new job (state NEW): log submit and validate (with the jobspec), then its
    dependencies."""
    jobspec: dict
    deps: tuple[Dep, ...] = ()


class Verdicts(JobEvent):
    """A job named by some of this job's dependencies started or ended: each
    (description, MET|WAIT|NEVER, why) for the dependencies naming it."""
    items: tuple[tuple[str, str, str], ...]


class BeginTimeReached(JobEvent):
    desc: str


class Raise(JobEvent):
    """An exception on the job.  `forward`: tell job-exec of a fatal one on a running
    job (not when job-exec itself reported it)."""
    type: str
    severity: int
    note: str = ""
    context: dict | None = None
    userid: int | None = None
    wait_status: int | None = None
    forward: bool = True


class Urgency(JobEvent):
    urgency: int
    userid: int


class Memo(JobEvent):
    memo: dict


class QueueChanged(JobEvent):
    """The queue was started or stopped (Actions.started says which)."""


class AllocAnswered(JobEvent):
    """sched's answer to request number `seq`: an allocation, or an error."""
    seq: int
    alloc: dict | None = None      # rank -> cores
    summary: str = ""
    gpus: dict | None = None       # rank -> GPU ids
    properties: dict | None = None  # property -> idset of the allocated ranks
    errnum: int = 0
    errstr: str = ""


class ExecStarted(JobEvent):
    """job-exec: every shell is through the start barrier."""


class ExecException(JobEvent):
    type: str
    severity: int
    note: str = ""
    context: dict | None = None


class ExecFinished(JobEvent):
    status: int


class ExecReleased(JobEvent):
    ranks: str = "all"
    final: bool = True


class ExecFailed(JobEvent):
    """job-exec's stream ended in an error (not its clean end)."""
    errstr: str = ""


class Restarted(JobEvent):
    """The job-manager restarted from its state directory with this job active: a
    job that held resources lost them with rank 0 (its shells are gone), and ends
    with an exception saying so; any other is looked at again (_action)."""


RESTART_NOTE = "rank 0 stopped while the job held resources: the instance restarted"


# -------------------------------------------------------------- effects out
class Effect(Struct, frozen=True):
    """What the machine asks the job-manager to do; each type has one interpreter
    (service/job_manager/effects.py, its table checked at import)."""


class Post(Effect):
    """Append an entry to the main eventlog (the state has already moved); `extra`
    are keys of the job's KVS directory written in the same commit (jobspec, R)."""
    name: str
    context: dict | None = None
    extra: dict | None = None
    timestamp: float = 0.0


class AskAlloc(Effect):
    """sched.alloc for the job's resources (in its queue, under its constraint, for its
    time limit); its answer is AllocAnswered(seq)."""
    seq: int
    priority: int


class CancelAlloc(Effect):
    """sched.cancel: withdraw the request sched holds."""


class Prioritize(Effect):
    priority: int


class Free(Effect):
    """sched.free: give the job's resources back."""


class StartExec(Effect):
    """job-exec.start with R; its responses are the Exec* events."""
    R: dict


class ForwardException(Effect):
    """job-exec.exception: a fatal exception on a running job (job-exec kills it)."""
    payload: dict


class Watch(Effect):
    """Look at this job again when job `target` starts or ends (a dependency)."""
    target: int


class BeginTimer(Effect):
    """Feed BeginTimeReached(desc) after `delay` seconds."""
    desc: str
    delay: float


class AnswerWaiters(Effect):
    """The job is inactive: answer job-manager.wait requests."""


class NotifyDependents(Effect):
    """The job started or ended: look again at the jobs that depend on it."""


class Inactive(Effect):
    """The job is inactive: count it out, and apply the purge policy."""
