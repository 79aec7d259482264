"""The small Python API the CLI is built on (blocking handle).

    from fluxlite.client.sync import Handle
    from fluxlite.jobapi import api
    h = Handle()
    jobid = api.submit(h, jobspec)
    for e in api.event_watch(h, jobid): print(e["name"])
    print(api.wait(h, jobid)["result"])

The requests are built once, by the `*_request` functions below, for this
blocking API, the asyncio one (aio.py) and the Executor alike: each returns
the (topic, payload) a handle's `call` or `rpc` takes.
"""

from __future__ import annotations

import collections
import itertools
import time

from ..errors import EndOfStream, FluxliteError, InvalidType, NoChild, NotFound, RPCTimeout
from ..job import eventlog as jel
from ..job import states
from ..protocol import kvs
from ..util import fluid, hostlist


# ------------------------------------------------------------- requests
def submit_request(jobspec, urgency: int = 16, flags: int = 0) -> tuple[str, dict]:
    """job-manager.submit for a Jobspec or a jobspec dict (flags: states.WAITABLE)."""
    from ..job.jobspec import Jobspec
    spec = jobspec.jobspec if isinstance(jobspec, Jobspec) else jobspec
    if not isinstance(spec, dict):
        raise InvalidType(f"submit takes a Jobspec or a jobspec dict, not "
                          f"{type(jobspec).__name__}")
    return "job-manager.submit", {"jobspec": spec, "urgency": urgency, "flags": flags}


def wait_request(jobid: int) -> tuple[str, dict]:
    return "job-manager.wait", {"id": jobid}


def info_request(jobid: int) -> tuple[str, dict]:
    return "job-manager.info", {"id": jobid}


def cancel_request(jobid: int, note: str = "") -> tuple[str, dict]:
    return "job-manager.cancel", {"id": jobid, "note": note}


def eventlog_get_request(jobid: int, path: str = "eventlog") -> tuple[str, dict]:
    """kvs.lookup of a job eventlog (its entries: kvs.value() of the answer)."""
    return "kvs.lookup", {"key": jel.eventlog_key(jobid, path)}


def eventlog_watch_request(key: str) -> tuple[str, dict]:
    """kvs-watch.lookup of an eventlog: its entries so far, then each new batch."""
    return "kvs-watch.lookup", {"key": key, "flags": kvs.WATCH | kvs.WAITCREATE
                                | kvs.WATCH_APPEND}


def job_data_request(jobid: int, key: str) -> tuple[str, dict]:
    """kvs.lookup of one of a job's keys (jobspec, R, eventlog, guest.output...)."""
    return "kvs.lookup", {"key": jel.job_key(jobid, key)}


# -------------------------------------------- pipelined (pending RPC) API
# Each sends its request and returns the pending RPC at once, so a command can
# send many before waiting for any (`h.wait(p); p.take()`), or give it an
# `on_response` callback and drive the handle (as flux.job's *_async calls).
def submit_async(h, jobspec, urgency: int = 16, flags: int = 0):
    return h.rpc(*submit_request(jobspec, urgency, flags))


def wait_async(h, jobid: int):
    return h.rpc(*wait_request(jobid))


WAIT_WINDOW = 256   # waits in flight at once: rank 0 holds each until its job ends


def wait_many(h, ids):
    """Each job's wait answer, in the order of `ids`, with at most WAIT_WINDOW waits
    held by the job-manager at once (ten thousand held waits would be its largest
    cost while the jobs are pending).  Waitable jobs are not purged before they are
    waited for, so a later wait still finds its job."""
    rest = iter(ids)
    waits = collections.deque(wait_async(h, i) for i in itertools.islice(rest, WAIT_WINDOW))
    while waits:
        p = waits.popleft()
        h.wait(p)
        yield p.take()
        nxt = next(rest, None)
        if nxt is not None:
            waits.append(wait_async(h, nxt))


def cancel_async(h, jobid: int, note: str = ""):
    return h.rpc(*cancel_request(jobid, note))


def kill_async(h, jobid: int, signum: int):
    return h.rpc("job-manager.kill", {"id": jobid, "signum": signum})


def eventlog_append_async(h, jobid: int, path: str, entry: dict):
    """Append one entry to a job eventlog (the CLI forwards stdin to `input` so)."""
    return h.rpc("kvs.commit", {"ops": [{"key": jel.eventlog_key(jobid, path),
                                          "append": [entry]}]})


# ------------------------------------------------------------ blocking API
def submit(h, jobspec, urgency: int = 16) -> int:
    return submit_full(h, jobspec, urgency)["id"]


def submit_full(h, jobspec, urgency: int = 16) -> dict:
    """Submit; the answer has the id and, if the job was refused at once, its exception."""
    return h.call(*submit_request(jobspec, urgency))


def wait(h, jobid: int, timeout: float | None = None) -> dict:
    """Block until the job is inactive: {id, success, errstr, result, returncode}."""
    return h.call(*wait_request(jobid), timeout=timeout)


def wait_any(h, timeout: float | None = None) -> dict:
    """Wait for one of the caller's jobs not waited for yet, as wait() does: the one
    that ended first if any has, else the next to end (the job-manager decides, so
    two callers never get the same job).  NoChild (exit code 2) if there is none."""
    try:
        return h.call("job-manager.wait", {}, timeout=timeout)
    except NoChild as exc:
        raise NoChild(exc.message, exit_code=2) from None  # as `flux job wait`


def info(h, jobid: int) -> dict:
    return h.call(*info_request(jobid))


def list_jobs(h, states: str = "active", *, ids: list[int] | None = None,
              userid: int | None = None) -> list[dict]:
    """The job-manager's records of the jobs in `states` ("active", "all"), or of
    the jobs `ids`, or of `userid`'s jobs only."""
    payload: dict = {"states": states}
    if ids:
        payload["ids"] = ids
    elif userid is not None:
        payload["userid"] = userid
    return h.call("job-manager.list", payload)["jobs"]


def hosts(h) -> list[str]:
    """Every rank's host name, in rank order (the `hostlist` attribute): what names a
    job's nodes, with util.hostlist.of_ranks."""
    return hostlist.decode(h.getattr("hostlist"))


def sched_view(h) -> dict:
    """The scheduler's view of the resources (what `resource list` prints): the
    scheduler's own (sched.resource-status), or, with none loaded, the one the
    resource service makes (resource.sched-status), as Flux's resource list
    reads the resource module's when the scheduler has none to give."""
    from ..errors import NoService
    try:
        return h.call("sched.resource-status", nodeid=0)
    except NoService:
        return h.call("resource.sched-status", nodeid=0)


def stats(h) -> dict:
    """Counts of the instance's jobs: running, pending, successful, failed, inactive_purged..."""
    return h.call("job-manager.stats")


def history(h) -> list[int]:
    """The ids of the caller's jobs, newest first."""
    return h.call("job-manager.history.get")["jobs"]


def job_data(h, jobid: int, key: str):
    """The value of one of a job's keys (jobspec, R, eventlog...); NotFound if absent."""
    return kvs.value(h.call(*job_data_request(jobid, key)))


def raise_all(h, *, userid: int | None, states: list[str], etype: str = "cancel",
              severity: int = 0, note: str = "", dry_run: bool = False) -> dict:
    """Raise an exception on every job of `userid` (None: every user) in `states`:
    {count, errors}."""
    return h.call("job-manager.raiseall", {
        "userid": userid, "states": states, "type": etype, "severity": severity,
        "note": note, "dry_run": dry_run})


# ------------------------------------------------------------------ queue
def queue_status(h, name: str | None = None) -> dict:
    """{enable, disable_reason, start, stop_reason} of queue `name` (or the anonymous
    one); with named queues and no name, also {"queues": {name: that}}."""
    return h.call("job-manager.queue-status", {} if name is None else {"name": name})


def queue_start(h, start: bool, *, all_queues: bool = False, name: str | None = None,
                **kw) -> None:
    """Start (or with start=False stop, with `reason`, `nocheckpoint`) scheduling, of
    queue `name` or of all (`all_queues`)."""
    payload = {"start": start, "all": all_queues, **kw}
    if name is not None:
        payload["name"] = name
    h.call("job-manager.queue-start", payload)


def queue_enable(h, enable: bool, *, all_queues: bool = False, reason: str | None = None,
                 name: str | None = None) -> None:
    """`queue enable` / `queue disable`: whether submissions are accepted."""
    payload: dict = {"enable": enable, "all": all_queues}
    if reason:
        payload["reason"] = reason
    if name:
        payload["name"] = name
    h.call("job-manager.queue-enable", payload)


def alloc_query(h) -> dict:
    """The job-manager's alloc counts: queue_length, alloc_pending, running."""
    return h.call("job-manager.alloc-query")


def queue_drain(h, timeout: float | None = None) -> None:
    """Block until no job is active (RPCTimeout after `timeout`)."""
    h.call("job-manager.drain", timeout=timeout)


def queue_idle(h, timeout: float | None = None) -> int:
    """Block until no job runs or cleans up; the number of pending jobs."""
    return h.call("job-manager.idle", timeout=timeout)["pending"]


def urgency(h, jobid: int, urgency: int) -> int:
    """Set a pending job's urgency (0-31); its previous urgency."""
    return h.call("job-manager.urgency", {"id": jobid, "urgency": urgency})["old_urgency"]


def cancel(h, jobid: int, note: str = "") -> None:
    h.call(*cancel_request(jobid, note))


def raise_exception(h, jobid: int, etype: str = "cancel", severity: int = 0,
                    note: str = "") -> None:
    h.call("job-manager.raise", {"id": jobid, "type": etype, "severity": severity,
                                 "note": note})


def kill(h, jobid: int, signum: int) -> None:
    h.call("job-manager.kill", {"id": jobid, "signum": signum})


def purge(h, *, age_limit: float = -1.0, num_limit: int = -1, force: bool = False,
          ids: list[int] | None = None) -> dict:
    """Purge inactive jobs beyond the limits (or these ids); without force only count
    them.  {count, inactive}: how many were (or would be) purged, how many remain."""
    payload = {"age_limit": age_limit, "num_limit": num_limit, "force": force}
    if ids is not None:
        payload["ids"] = ids
    return h.call("job-manager.purge", payload)


def event_watch(h, jobid: int, path: str = "eventlog", *, follow: bool = True,
                timeout: float | None = None):
    """Yield the entries of a job eventlog (path: eventlog, exec, output, input).

    Without `follow`, the entries there now.  With it, entries as they are
    appended, until the log can grow no more (see Follower).  A log the job never
    created raises NotFound saying why, at once without `follow`, once the job is
    inactive with it.  An unknown job id raises NotFound.  `timeout` bounds the
    whole watch (RPCTimeout).
    """
    path = "eventlog" if path == "main" else path
    if not follow:
        try:
            value = kvs.value(h.call(*eventlog_get_request(jobid, path)))
        except NotFound:
            raise _no_eventlog(h, jobid, path) from None
        yield from value
        return
    info(h, jobid)  # an unknown id is an error now, not a wait for a log never written
    deadline = None if timeout is None else time.monotonic() + timeout
    queue: collections.deque = collections.deque()
    f = Follower(h, jobid, path, on_entry=queue.append).start()
    try:
        while True:
            while queue:
                yield queue.popleft()
            if f.done:
                break
            left = None if deadline is None else deadline - time.monotonic()
            if not h.run_until(lambda: queue or f.done, left):
                raise RPCTimeout(f"job {fluid.f58(jobid)}: no end of its {path} eventlog "
                                 f"within {timeout:g}s")
        if f.error is not None:
            raise f.error
        if f.missing:
            raise _no_eventlog(h, jobid, path, f.main_entries)
    finally:
        f.close()


class Follower:
    """The one eventlog follower: a job eventlog, and its main log beside it, by
    callbacks on a handle the caller drives (`h.run_until(lambda: f.done)`), so a
    command can follow a job while it also serves signals and stdin.

    `on_entry(e)` gets the followed log's entries as they are appended; with
    another log than the main one, `on_main(e)` gets the main log's.  The follower
    is `done` once the log can grow no more: the main log after `clean`, the exec
    log after `done`, the output log once every task's streams reached eof, any log
    once the job is inactive (its main log's `clean`: the KVS answers in commit
    order, so everything written before `clean` has arrived by then).  With
    `until_clean`, only `clean` ends it (`run` wants the finish status too).
    `missing` says the job ended without ever creating the log; `error` holds a
    watch's failure.  `on_done()`, if given, is called once when it becomes done
    (for callers driven by an event loop rather than `run_until`)."""

    def __init__(self, h, jobid: int, path: str = "eventlog", *, on_entry, on_main=None,
                 until_clean: bool = False, on_done=None):
        self.h, self.jobid, self.path = h, jobid, path
        self.on_entry, self.on_main, self.on_done = on_entry, on_main, on_done
        self.until_clean = until_clean
        self.end = _LogEnd("eventlog" if until_clean else path)
        self.done = False
        self.created = False
        self.missing = False
        self.error: FluxliteError | None = None
        self.main_entries: list[dict] = []
        self._watches: list = []

    def start(self) -> Follower:
        # the followed log first: the main log's `clean` comes after all of it
        self._watches.append(self._watch(jel.eventlog_key(self.jobid, self.path), self._log))
        if self.path != "eventlog":
            self._watches.append(self._watch(jel.eventlog_key(self.jobid), self._main))
        return self

    def _watch(self, key: str, cb):
        p = self.h.rpc(*eventlog_watch_request(key), streaming=True)
        p.on_response = cb
        return key, p

    def _failed(self, msg) -> bool:
        err = msg.error()
        if err is None:
            return False
        if not isinstance(err, EndOfStream):  # the key was removed, nothing more
            self.error = err
        self._end()
        return True

    def _end(self) -> None:
        if not self.done:
            self.done = True
            if self.on_done is not None:
                self.on_done()

    def _log(self, msg) -> None:
        if self.done or self._failed(msg):
            return
        self.created = True
        for e in kvs.value(msg.payload):
            self.on_entry(e)
            if self.end.reached(e):
                self._end()
                return

    def _main(self, msg) -> None:
        if self.done or self._failed(msg):
            return
        for e in kvs.value(msg.payload):
            self.main_entries.append(e)
            if self.on_main is not None:
                self.on_main(e)
            if e.get("name") == "clean":
                self.missing = not self.created
                self._end()
                return

    def close(self) -> None:
        """Stop the watches early, here and in the KVS (not only when the handle closes)."""
        for _key, p in self._watches:
            if p.done:
                continue
            p.cancel()
            if self.h.connected and not getattr(getattr(self.h, "sock", None), "closed",
                                                False):
                self.h.send("kvs-watch.cancel", {"matchtag": p.matchtag})
        self._watches.clear()


class _LogEnd:
    """Recognises the entry after which an eventlog can grow no more: `clean`
    (main), `done` (exec), the last stream's eof (output); other logs end only
    with the job."""

    def __init__(self, path: str):
        self.final = {"eventlog": "clean", "exec": "done"}.get(path)
        self.output = path == "output"
        self.count: dict[str, int] | None = None
        self.eofs: dict[str, set] = {}

    def reached(self, e: dict) -> bool:
        name = e.get("name")
        if self.final is not None:
            return name == self.final
        if not self.output:
            return False
        ctx = e.get("context") or {}
        if name == "header":
            self.count = dict(ctx.get("count") or {})
        elif name == "data" and ctx.get("eof"):
            self.eofs.setdefault(ctx.get("stream"), set()).add(ctx.get("rank"))
        return bool(self.count) and all(len(self.eofs.get(s, ())) >= n
                                        for s, n in self.count.items())


def _no_eventlog(h, jobid: int, path: str, main: list[dict] | None = None) -> NotFound:
    """ENOENT for a missing job eventlog, saying whether the job may still write it."""
    state = info(h, jobid)["state"]
    if main is None and state == states.INACTIVE:
        main = kvs.value(h.call(*eventlog_get_request(jobid)))
    return no_eventlog_error(jobid, path, state, main)


def no_eventlog_error(jobid: int, path: str, state: str, main: list[dict] | None) -> NotFound:
    """What _no_eventlog says, from the job's state and (if inactive) its main log."""
    job = fluid.f58(jobid)
    if state != states.INACTIVE:
        return NotFound(f"job {job} has no {path} eventlog yet")
    if not any(e.get("name") == "start" for e in main):
        return NotFound(f"job {job} never started, so it has no {path} eventlog")
    return NotFound(f"job {job} has no {path} eventlog")
