"""The sources and set operations of `fluxlite hostlist` (flux-hostlist(1)).

A source is `instance` (the hostlist attribute), `local` (the job's hosts
when FLUXLITE_JOB_ID is set, else instance), `avail` (instance less down or
drained ranks), `stdin`/`-`, a job id, or a literal hostlist.  Lists keep
order and repeats until an operation says otherwise, as Flux's do.
"""

from __future__ import annotations

import os
import select
import sys

import click

from ..errors import FluxliteError, NotFound, UsageError
from ..util import hostlist as hl
from ..util import idset

STDIN_TIMEOUT = 15.0   # as Flux: a forgotten pipe fails rather than hangs
TIMEOUT_VARS = ("FLUXLITE_HOSTLIST_STDIN_TIMEOUT", "FLUX_HOSTLIST_STDIN_TIMEOUT")


def _stdin_timeout() -> float:
    """Seconds to wait for stdin: STDIN_TIMEOUT, or as Flux's variable says."""
    for var in TIMEOUT_VARS:
        text = os.environ.get(var)
        if text:
            try:
                value = float(text)
            except ValueError:
                value = -1.0
            if not value >= 0:   # NaN too
                raise UsageError(f"{var}={text!r} is not a number of seconds (0 or more)")
            return value
    return STDIN_TIMEOUT


class _Sources:
    def __init__(self, fallback: bool):
        self.fallback = fallback
        self._h = None

    def handle(self):
        if self._h is None:
            from .common import handle
            self._h = handle()
        return self._h

    def close(self):
        if self._h is not None:
            self._h.close()

    def get(self, arg: str) -> list[str]:
        if arg == "instance":
            return hl.decode(self.handle().getattr("hostlist"))
        if arg == "local":
            jobid = os.environ.get("FLUXLITE_JOB_ID") or os.environ.get("FLUX_JOB_ID")
            return self.job(jobid, jobid) if jobid else self.get("instance")
        if arg in ("avail", "available"):
            hosts = self.get("instance")
            ranks = self.handle().call("resource.status", nodeid=0)["ranks"]
            gone = {int(r) for r, v in ranks.items()
                    if not v.get("online") or v.get("lost") or v.get("drained") is not None}
            return [h for r, h in enumerate(hosts) if r not in gone]
        if arg in ("stdin", "-"):
            return _stdin()
        from ..util import fluid
        try:
            jobid = fluid.parse(arg)
        except ValueError:
            jobid = None
        if jobid is not None:
            return self.job(jobid, arg)
        try:
            return hl.decode(arg)
        except ValueError:
            raise UsageError(f"Invalid jobid or hostlist {arg}") from None

    def job(self, jobid, arg: str) -> list[str]:
        from ..jobapi import api
        from ..util import fluid
        i = jobid if isinstance(jobid, int) else fluid.parse(str(jobid))
        h = self.handle()
        try:
            jobs = api.list_jobs(h, "all", ids=[i])
        except NotFound:
            jobs = []
        if not jobs:
            if self.fallback:
                return hl.decode(arg)
            raise NotFound(f"job {arg} not found")
        ranks = sorted(idset.decode(jobs[0].get("ranks") or ""))
        return [api.hosts(h)[r] for r in ranks]


def _stdin() -> list[str]:
    timeout = _stdin_timeout()
    if sys.stdin is None:   # closed: no hosts can come
        raise UsageError("stdin is closed: no hosts to read (name SOURCES such as "
                         "instance or a hostlist, or use -l for the local hosts)")
    if not select.select([sys.stdin], [], [], timeout)[0]:
        raise FluxliteError(f"timeout after {timeout:g}s waiting for stdin")
    out: list[str] = []
    for line in sys.stdin.read().splitlines():
        if line.strip():
            try:
                out += hl.decode(line.strip())
            except ValueError as exc:
                raise UsageError(f"stdin: {exc}") from None
    return out


def resolve(sources, fallback: bool) -> list[list[str]]:
    src = _Sources(fallback)
    try:
        return [src.get(a) for a in sources]
    finally:
        src.close()


def combine(lists, *, intersect=False, minus=False, xor=False) -> list[str]:
    first, rest = list(lists[0]), lists[1:]
    if intersect:
        for other in rest:
            first = list(dict.fromkeys(h for h in first if h in other))
        return first
    if minus:
        for other in rest:
            first = [h for h in first if h not in other]
        return first
    if xor:
        for other in rest:
            first = list(dict.fromkeys([h for h in first if h not in other] +
                                       [h for h in other if h not in first]))
        return first
    for other in rest:
        first += other
    return first


def transform(hosts, *, exclude, sort, unique, limit, nth) -> list[str]:
    if exclude:
        try:
            drop = hl.decode(exclude)
        except ValueError:
            drop = []
        kept = [h for h in hosts if h not in drop]
        if len(kept) == len(hosts):
            try:
                gone = idset.decode(exclude)
                kept = [h for i, h in enumerate(hosts) if i not in gone]
            except ValueError:
                pass
        hosts = kept
    if sort:
        hosts = sorted(hosts, key=_natural)
    if unique:
        hosts = list(dict.fromkeys(hosts))
        if sort:
            hosts = sorted(hosts, key=_natural)
    if limit:
        hosts = hosts[:limit] if limit > 0 else hosts[limit:]
    if nth is not None:
        from_end = nth.startswith("-")
        try:
            ids = sorted(idset.decode(nth[1:] if from_end else nth))
        except ValueError:
            raise UsageError(f"--nth: {nth!r} is not an idset") from None
        n = len(hosts)
        if from_end:
            hosts = [hosts[n - i] for i in reversed(ids) if 0 < i <= n]
        else:
            hosts = [hosts[i] for i in ids if i < n]
    return hosts


def _natural(host: str):
    import re
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", host)]


def show(hosts, *, find, count, expand, delimiter) -> None:
    if find:
        idx = []
        for h in hl.decode(find):
            if h not in hosts:
                raise NotFound(f"{h} not found in hostlist")
            idx.append(str(hosts.index(h)))
        click.echo(" ".join(idx))
    elif count:
        click.echo(str(len(hosts)))
    elif expand:
        if hosts:
            click.echo(delimiter.replace("\\n", "\n").join(hosts))
    elif hosts:
        click.echo(hl.encode(hosts))
