"""Queues and job policy from Flux's `[queues]` and `[policy]` tables.

    [queues.batch]
    requires = ["batch"]                       # properties its nodes must have
    policy.limits.duration = "1h"
    [policy]
    jobspec.defaults.system.queue = "batch"    # a job that names no queue
    jobspec.defaults.system.duration = "10m"   # a job with no time limit
    limits.duration = "2h"
    limits.job-size.max.nnodes = 4             # also min., and ncores, ngpus
    access.allow-user = ["alice"]              # and allow-group: see below

`check_queues`/`check_policy` check the tables (an unknown key is an error
naming it) when the config is read; `Policy` answers, for a job at submit,
which queue it is in and whether that queue's limits allow it.  A queue's
`policy` table overrides the instance's, key by key, as in Flux.  With no
queues configured there is one anonymous queue (named "").

`access` (who may submit to a queue) and `scheduler` (a scheduler's own
per-queue settings, Fluxion's) are checked as flux-core checks them and, as
in flux-core, not enforced (flux-core leaves that to flux-accounting).
"""

from __future__ import annotations

from ..errors import UsageError
from ..util import fsd

SIZE_KEYS = ("nnodes", "ncores", "ngpus")


def _fsd(value, where: str) -> float:
    try:
        secs = fsd.parse(value if isinstance(value, str) else f"{value}s")
    except (ValueError, UsageError) as exc:
        raise UsageError(f"{where}: {exc}") from None
    if secs < 0:
        raise UsageError(f"{where}: a duration must not be negative")
    return secs


def _table(value, where: str, allowed: tuple[str, ...]) -> dict:
    if not isinstance(value, dict):
        raise UsageError(f"{where}: expected a table, got {value!r}")
    for k in value:
        if k not in allowed:
            raise UsageError(f"{where}.{k}: unknown key (allowed: {', '.join(allowed)})")
    return value


def check_policy(value, where: str) -> dict:
    """Check a `[policy]` table (or a queue's `policy`); returns it unchanged."""
    _table(value, where, ("jobspec", "limits", "access", "scheduler"))
    access = _table(value.get("access", {}), f"{where}.access", ("allow-user", "allow-group"))
    for k, names in access.items():
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise UsageError(f"{where}.access.{k}: expected an array of names")
    js = _table(value.get("jobspec", {}), f"{where}.jobspec", ("defaults",))
    defaults = _table(js.get("defaults", {}), f"{where}.jobspec.defaults", ("system",))
    system = _table(defaults.get("system", {}), f"{where}.jobspec.defaults.system",
                    ("duration", "queue"))
    if "duration" in system:
        _fsd(system["duration"], f"{where}.jobspec.defaults.system.duration")
    if "queue" in system and not isinstance(system["queue"], str):
        raise UsageError(f"{where}.jobspec.defaults.system.queue: expected a queue name")
    limits = _table(value.get("limits", {}), f"{where}.limits", ("duration", "job-size"))
    if "duration" in limits:
        _fsd(limits["duration"], f"{where}.limits.duration")
    size = _table(limits.get("job-size", {}), f"{where}.limits.job-size", ("max", "min"))
    for bound in ("max", "min"):
        t = _table(size.get(bound, {}), f"{where}.limits.job-size.{bound}", SIZE_KEYS)
        for k, v in t.items():
            if not isinstance(v, int) or isinstance(v, bool) or v < -1:
                raise UsageError(f"{where}.limits.job-size.{bound}.{k}: expected a count "
                                 "(-1: unlimited)")
    return value


def check_queues(value, where: str) -> dict:
    """Check a `[queues]` table: each queue's `requires` (property names) and
    `policy`."""
    if not isinstance(value, dict):
        raise UsageError(f"{where}: expected a table of queues ([queues.NAME])")
    for name, q in value.items():
        at = f"{where}.{name}"
        _table(q, at, ("requires", "policy"))
        req = q.get("requires", [])
        if not isinstance(req, list) or not all(isinstance(p, str) and p for p in req):
            raise UsageError(f"{at}.requires: expected an array of property names")
        if "policy" in q:
            check_policy(q["policy"], f"{at}.policy")
    return value


def _get(table: dict, *path, default=None):
    for key in path:
        if not isinstance(table, dict) or key not in table:
            return default
        table = table[key]
    return table


class Policy:
    """The instance's queues and limits, as a job at submit sees them."""

    def __init__(self, queues: dict | None = None, policy: dict | None = None):
        self.queues: dict[str, dict] = queues or {}
        self.policy: dict = policy or {}
        self.default_queue: str | None = _get(self.policy, "jobspec", "defaults", "system",
                                              "queue")
        if self.default_queue is not None and self.default_queue not in self.queues:
            raise UsageError(f"policy.jobspec.defaults.system.queue: {self.default_queue!r} "
                             f"is not a configured queue (queues: "
                             f"{', '.join(self.queues) or 'none'})")

    @property
    def names(self) -> list[str]:
        """Queue names; [""] for the one anonymous queue."""
        return list(self.queues) or [""]

    def requires(self, queue: str) -> list[str]:
        return list(self.queues.get(queue, {}).get("requires", []))

    def _value(self, queue: str, *path):
        """A policy key: the queue's own, else the instance's."""
        own = _get(self.queues.get(queue, {}), "policy", *path)
        return own if own is not None else _get(self.policy, *path)

    def queue_of(self, system: dict) -> str:
        """The queue a job's attributes.system names (or the default); UsageError if it
        names none where queues are configured, or one that does not exist."""
        name = system.get("queue")
        if not self.queues:
            if name not in (None, ""):
                raise UsageError(f"queue {name!r} does not exist: this instance has no "
                                 "named queues")
            return ""
        if name is None:
            name = self.default_queue
        if name is None:
            raise UsageError(f"no queue specified and no default queue (queues: "
                             f"{', '.join(self.queues)}): use -q/--queue")
        if not isinstance(name, str) or name not in self.queues:
            raise UsageError(f"invalid queue {name!r} (queues: {', '.join(self.queues)})")
        return name

    def default_duration(self, queue: str) -> float:
        """Seconds a job without a time limit is given in `queue` (0: unlimited)."""
        v = self._value(queue, "jobspec", "defaults", "system", "duration")
        return 0.0 if v is None else _fsd(v, "duration")

    def check_limits(self, queue: str, duration: float, size: dict[str, int]) -> None:
        """UsageError naming the limit a job of `duration` and `size` ({nnodes, ncores,
        ngpus}: what it asks for at least) breaks in `queue`."""
        where = f"queue {queue!r}: " if queue else ""
        limit = self._value(queue, "limits", "duration")
        if limit is not None:
            secs = _fsd(limit, "limits.duration")
            if secs and (duration == 0 or duration > secs):
                asked = "no time limit" if duration == 0 else f"{fsd.format(duration)}"
                raise UsageError(f"{where}job duration ({asked}) exceeds the policy limit "
                                 f"of {fsd.format(secs)}")
        for k in SIZE_KEYS:
            hi = self._value(queue, "limits", "job-size", "max", k)
            lo = self._value(queue, "limits", "job-size", "min", k)
            n = size.get(k, 0)
            if hi is not None and hi >= 0 and n > hi:
                raise UsageError(f"{where}job {k}={n} exceeds the policy limit of {hi}")
            if lo is not None and lo >= 0 and n < lo:
                raise UsageError(f"{where}job {k}={n} is under the policy minimum of {lo}")
