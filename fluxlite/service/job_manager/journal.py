"""The journal (flux-core's journal.c): job-manager.events-journal streams the main
eventlog entries of every job the caller may see, history first."""

from __future__ import annotations

from ...errors import FluxliteError, ProtocolError
from ...job import states
from ...job.actions import Job
from ...job.eventlog import job_key
from ...protocol.message import STREAMING
from ...protocol.schema import Matchtag, Struct
from ..base import ANY, handler


class JournalRequest(Struct, kw_only=True):
    full: bool = False    # history of every known job (else of the active ones only)


class JournalCancelRequest(Struct, kw_only=True):
    matchtag: Matchtag


JOURNAL_BATCH = 64   # jobs per history response of job-manager.events-journal

class Journal:
    """job-manager.events-journal streams (a part of JobManagerService)."""

    # ------------------------------------------------------------ journal

    # job-manager.events-journal streams the main eventlog entries of every job the
    # caller may see (the owner: all; a guest: its own), as Flux's job-manager does.
    # Each response is {"jobs": [{"id", "events", "jobspec"?, "R"?}...]}: first the
    # history (every known job with `full`, else the active ones), JOURNAL_BATCH jobs
    # a response, then {"jobs": []} (the sentinel), then one response per new entry
    # (the submit entry with the job's jobspec, alloc with its R).  Responses go
    # straight to the client's connection, bounded by broker.client-queue like every
    # stream.  The stream ends with the client, events-journal-cancel or shutdown.
    def _journal_job(self, job: Job, events: list, jobspec: bool, R: bool) -> dict:
        out = {"id": job.id, "events": events}
        for key, want in (("jobspec", jobspec), ("R", R)):
            if want:
                try:
                    value = self.kvs.lookup(job_key(job.id, key))
                except FluxliteError:
                    continue
                out[key] = _redacted(value) if key == "jobspec" else value
        return out

    def _journal_sees(self, msg, job: Job) -> bool:
        return job.userid == msg.userid or self.is_owner(msg)

    def _journal_post(self, job: Job, events: list) -> None:
        for e in events:
            resp = {"jobs": [self._journal_job(job, [e], e["name"] == "submit",
                                               e["name"] == "alloc")]}
            for w in self.journal:
                if self._journal_sees(w, job):
                    self.respond(w, resp)

    @handler("job-manager.events-journal", schema=JournalRequest, streaming=True, roles=ANY)
    def events_journal(self, msg, r):
        if not msg.flags & STREAMING:
            raise ProtocolError("job-manager.events-journal requires the streaming flag")
        batch: list = []
        for job in self.jobs.values():   # nothing here changes the table
            if (not r.full and job.state == states.INACTIVE) or not self._journal_sees(msg, job):
                continue
            try:
                events = self.kvs.lookup(job.key)
            except FluxliteError:
                continue
            batch.append(self._journal_job(job, events, True, True))
            if len(batch) >= JOURNAL_BATCH:
                self.respond(msg, {"jobs": batch})
                batch = []
        if batch:
            self.respond(msg, {"jobs": batch})
        self.respond(msg, {"jobs": []})
        self.journal.append(msg)
        self.track_stream(msg, lambda: self._journal_drop(msg))

    def _journal_drop(self, msg) -> bool:
        if msg in self.journal:
            self.journal.remove(msg)
            return True
        return False

    @handler("job-manager.events-journal-cancel", schema=JournalCancelRequest, roles=ANY)
    def events_journal_cancel(self, msg, r):
        for w in [w for w in self.journal if w.matchtag == r.matchtag and w.route == msg.route]:
            self._journal_drop(w)
            self.untrack_stream(w)
            self.end_stream(w)
        return {}

def _redacted(jobspec: dict) -> dict:
    """A jobspec without its environment, as Flux's journal gives it."""
    system = jobspec.get("attributes", {}).get("system", {})
    if "environment" not in system:
        return jobspec
    system = {k: v for k, v in system.items() if k != "environment"}
    return {**jobspec, "attributes": {**jobspec["attributes"], "system": system}}

