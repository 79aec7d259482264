"""Finding jobs by name or id range, for `fluxlite pgrep` and `pkill` (flux-pgrep(1)).

EXPRESSION is a regular expression searched in each job's name (`name:REGEX`
says so explicitly) and/or `ID..ID`, an inclusive range of job ids.  Jobs are
searched newest first, among the caller's pending and running ones unless
-a, -A, -u or -f say otherwise.
"""

from __future__ import annotations

import re
import time

import click

from ..errors import UsageError

PGREP_FORMATS = {
    "default": "{id.f58}",
    "full": ("{id.f58:>12} {username:<8.8} {name:<10.10+} {status_abbrev:>2.2} "
             "{ntasks:>6} {nnodes:>6h} {contextual_time!F:>8h} {contextual_info}"),
    "long": ("{id.f58:>12} {username:<8.8} {name:<10.10+} {status:>9.9} {ntasks:>6} "
             "{nnodes:>6h} {t_submit!d:%b%d %R::>12} {t_remaining!F:>12h} "
             "{contextual_time!F:>8h} {contextual_info}"),
    "deps": ("{id.f58:>12} {name:<10.10+} {urgency:<3} {priority:<12} {state:<8.8} "
             "{dependencies}"),
}


class Expression:
    def __init__(self, words: tuple[str, ...]):
        from .common import parse_jobid
        self.regex = None
        self.ids: tuple[int, int] | None = None
        for word in words:
            if ":" not in word and ".." in word:
                lo, _, hi = word.partition("..")
                try:
                    self.ids = (parse_jobid(lo), parse_jobid(hi))
                    continue
                except UsageError:
                    pass   # not ids: a pattern after all
            if self.regex is not None:
                raise UsageError("expression error: Only one pattern can be provided",
                                 exit_code=2)
            pattern = word[5:] if word.startswith("name:") else word
            try:
                self.regex = re.compile(pattern)
            except re.error as exc:
                raise UsageError(f"expression error: {exc}", exit_code=2) from None

    def match(self, job: dict) -> bool:
        if self.regex is not None and not self.regex.search(job.get("name") or ""):
            return False
        if self.ids is not None and not self.ids[0] <= job["id"] <= self.ids[1]:
            return False
        return True


def find_jobs(h, words, *, all_states, all_users, user, filters, count, max_entries,
              queues=()):
    from ..jobapi import api
    from .jobs import flux_order
    from .jobselect import filter_option, matches, user_option
    expr = Expression(words)
    userid = None if all_users else user_option(None, None, user)
    wanted = filter_option(None, None, filters) if filters else None
    if all_states and not wanted:
        wanted = ["pending", "running", "inactive"]
    wanted = wanted or ["pending", "running"]
    which = "all" if set(wanted) - {"pending", "running", "active"} else "active"
    jobs = api.list_jobs(h, which, userid=userid)
    jobs = sorted(jobs, key=lambda j: -j["id"])[:max_entries]
    jobs = [j for j in flux_order(jobs) if matches(j, wanted) and expr.match(j)]
    wanted_queues = {q.strip() for v in queues for q in v.split(",") if q.strip()}
    if wanted_queues:
        jobs = [j for j in jobs if (j.get("queue") or "") in wanted_queues]
    return jobs[:count]


def print_jobs(h, jobs: list[dict], fmt: str, header: bool) -> None:
    from ..jobapi import api
    from .jobs import FORMATS, HEADINGS, job_values
    from .outformat import OutputFormat
    out = OutputFormat(fmt, HEADINGS, FORMATS)
    hosts = api.hosts(h) if {"nodelist", "contextual_info"} & set(out.fields) else []
    now = time.time()
    lines = [out.format(job_values(j, hosts, now)) for j in jobs]
    if header:
        lines.insert(0, out.header())
    click.echo("\n".join(lines))
