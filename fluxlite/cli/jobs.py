"""`fluxlite jobs`: list jobs the way Flux's `flux jobs` does.

Reads `job-manager.list` and prints a table, one line per job, through a
Flux-style format (outputs.md: the default table, `-o long`, or any
`-o '{field}...'` string), in Flux's job-list order unless --sort says
otherwise (`flux_order`).  Fields computed here rather than by the service:
F58 ids, user names, STATUS, runtime, nodelist (from the `hostlist` attribute),
inactive_reason, success, dependencies as Flux shows them.
"""

from __future__ import annotations

import datetime
import json
import os
import pwd
import signal
import sys
import time

import click

from ..errors import NotFound
from ..job import states as st
from ..jobapi import api
from ..util import fluid, hostlist, idset
from .common import HELP, handle, parse_jobid
from .jobselect import filter_option, selected, since_option, user_option
from .outformat import OutputFormat

FORMATS = {  # as Flux's: a QUEUE column only when some job names a queue
    "default": ("{id.f58:>12} ?:{queue:<8.8} +:{username:<8} {name:<10.10+} "
                "{status_abbrev:>2.2} {ntasks:>6} {nnodes:>6h} {contextual_time!F:>8h} "
                "{contextual_info}"),
    "long": ("{id.f58:>12} ?:{queue:<8.8} +:{username:<8} {name:<10.10+} {status:>9.9} "
             "{ntasks:>6} {nnodes:>6h} {t_submit!d:%b%d %R::>12} {t_remaining!F:>12h} "
             "{contextual_time!F:>8h} {contextual_info}"),
    "deps": ("{id.f58:>12} ?:{queue:<8.8} {name:<10.10+} {urgency:<3} {priority:<12} "
             "{state:<8.8} {dependencies}"),
    "endreason": ("{id.f58:>12} ?:{queue:<8.8} +:{username:<8} {name:<10.10+} "
                  "{status_abbrev:>2.2} {t_inactive!d:%b%d %R::>12h} {inactive_reason}"),
    "cute": ("{id.f58:>12} ?:{queue:<8.8} +:{username:<8} {name:<10.10+} "
             "{status_emoji:>5.5} {ntasks:>6} {nnodes:>6h} {contextual_time!F:>8h} "
             "{contextual_info}"),
    "instances": ("{id.f58:>12} {username:<8.8} {name:<10.10+} {status_abbrev:>2.2} "
                  "{nnodes:>6h} {depth:>5h} {contextual_time!F:>8h} {uri}"),
}

HEADINGS = {  # the first ones are suggested when a field is unknown
    "id": "JOBID", "username": "USER", "name": "NAME", "status": "STATUS",
    "result": "RESULT", "returncode": "RC", "ntasks": "NTASKS", "nnodes": "NNODES",
    "runtime": "RUNTIME", "nodelist": "NODELIST",
    "id.f58": "JOBID", "id.f58plain": "JOBID", "id.dec": "JOBID", "id.hex": "JOBID",
    "id.dothex": "JOBID", "id.words": "JOBID", "id.emoji": "JOBID", "id.kvs": "JOBID",
    "userid": "UID", "user": "USER", "urgency": "URG",
    "priority": "PRI", "state": "STATE", "state_single": "S", "status_abbrev": "ST",
    "state_emoji": "STATE", "result_emoji": "RESULT", "status_emoji": "STATUS",
    "result_abbrev": "RS", "waitstatus": "WSTATUS",
    "exception.occurred": "EXCEPTION-OCCURRED", "exception.severity": "EXCEPTION-SEVERITY",
    "exception.type": "EXCEPTION-TYPE", "exception.note": "EXCEPTION-NOTE",
    "ncores": "NCORES", "ranks": "RANKS", "t_submit": "T_SUBMIT", "t_run": "T_RUN",
    "t_cleanup": "T_CLEANUP", "t_inactive": "T_INACTIVE", "duration": "DURATION",
    "expiration": "EXPIRATION", "t_remaining": "T_REMAINING", "uri": "URI",
    "uri.local": "URI",
    "instance": "INSTANCE", "depth": "DEPTH", "contextual_time": "TIME",
    "contextual_info": "INFO", "dependencies": "DEPENDENCIES", "success": "SUCCESS",
    "inactive_reason": "INACTIVE-REASON", "queue": "QUEUE", "cwd": "CWD",
    "t_depend": "T_DEPEND", "annotations": "ANNOTATIONS",
}


class Headings(dict):
    """HEADINGS, and any {annotations.KEY...} or {user.KEY} (Flux's annotations; the
    heading is the key's last part, upper case)."""

    def __contains__(self, field) -> bool:
        return dict.__contains__(self, field) or _is_annotation(field)

    def __getitem__(self, field):
        if dict.__contains__(self, field):
            return dict.__getitem__(self, field)
        return field.rsplit(".", 1)[-1].upper()


def _is_annotation(field) -> bool:
    return isinstance(field, str) and field.startswith(("annotations.", "sched.", "user."))


def _annotation(job: dict, field: str):
    """The value of {annotations.sched.reason_pending} and the like ("" when unset)."""
    path = field.split(".")
    value = job.get("annotations") or {}
    for part in path[1:] if path[0] == "annotations" else path:
        value = value.get(part, "") if isinstance(value, dict) else ""
    return value if not isinstance(value, dict) else json.dumps(value)

def _sort_keys(ctx, param, value):
    """--sort KEY[,-KEY...]: (field, descending) pairs, first key most significant."""
    if value is None:
        return []
    keys = []
    for word in value.split(","):
        word = word.strip()
        name = word[1:] if word.startswith("-") else word
        if name not in HEADINGS:
            raise click.BadParameter(f"invalid sort key {name!r}: expected a field name "
                                     "such as id, t_submit, priority, name or -runtime")
        keys.append((name, word.startswith("-")))
    return keys


def _sort(pairs: list, keys: list) -> list:
    for name, descending in reversed(keys):  # stable sorts: the last key first
        field = "id.dec" if name == "id" or name.startswith("id.") else name  # numerically
        pairs.sort(key=lambda p: (p[1][field] != "", p[1][field]), reverse=descending)
    return pairs


def flux_order(jobs: list[dict]) -> list[dict]:
    """Flux's job-list order: pending jobs by priority (highest first; a job with no
    priority yet counts as 0), then submit order; then running jobs, latest started
    first; then inactive jobs, latest ended first."""
    def key(job):
        state = job["state"]
        if state == st.INACTIVE:
            return (2, -(job.get("t_inactive") or 0.0), -job["id"])
        if state in st.RUNNING:
            return (1, -(job.get("t_run") or 0.0), job["id"])
        return (0, -(_priority(job) or 0), job["id"])
    return sorted(jobs, key=key)


def _priority(job: dict) -> int | str:
    """The job's priority, or "" before it has one (it is given on leaving PRIORITY)."""
    if job["state"] in (st.NEW, st.DEPEND, st.PRIORITY):
        return ""
    return job.get("priority", "")


def _dependencies(deps: list[str]) -> str:
    """Flux's DEPENDENCIES: a begin-time shown as begin@HH:MM (today) or
    begin@MonDD-HH:MM, seconds added when not 0."""
    out = []
    for dep in deps:
        name, _, value = dep.partition("=")
        if name == "begin-time":
            try:
                at = datetime.datetime.fromtimestamp(float(value))
            except ValueError:
                out.append(dep)
                continue
            dep = f"begin@{at:%H:%M}" if at.date() == datetime.date.today() \
                else f"begin@{at:%b%d-%H:%M}"
            if at.second:
                dep += f":{at:%S}"
        out.append(dep)
    return ",".join(out)


def inactive_reason(job: dict) -> str:
    """Why an inactive job ended, as Flux's INACTIVE-REASON (flux.job.info): Exit N,
    Canceled[: note], Exception: type=T note=..., a signal's description, Timeout."""
    if job["state"] != st.INACTIVE:
        return ""
    result, ex = job.get("result"), job.get("exception") or {}
    rc = job.get("returncode") or 0
    if result == "CANCELED":
        if ex.get("occurred") and ex.get("type") == "cancel" and ex.get("note"):
            return f"Canceled: {ex['note']}"
        return "Canceled"
    if result == "TIMEOUT":
        return "Timeout"
    if result == "FAILED":
        if ex.get("occurred") and ex.get("type") != "exec" and ex.get("severity") == 0:
            note = f" note={ex['note']}" if ex.get("note") else ""
            return f"Exception: type={ex['type']}{note}"
        if rc > 128:
            try:
                return signal.strsignal(rc - 128) or f"Signaled {rc - 128}"
            except ValueError:
                return f"Signaled {rc - 128}"
        special = {126: "Command invoked cannot execute", 127: "command not found",
                   128: "Invalid argument to exit"}
        if rc in special:
            return special[rc]
    return f"Exit {rc}"


def stats_line(h) -> tuple[str, bool]:
    """Flux's summary of every job in the instance, and whether any is active."""
    s = api.stats(h)
    return (f"{s['running']} running, {s['successful']} completed, {s['failed']} failed, "
            f"{s['pending']} pending, {s['inactive_purged']} inactive purged",
            bool(s["running"] or s["pending"]))


_users: dict[int, str] = {}


def username(userid: int) -> str:
    if userid not in _users:
        try:
            _users[userid] = pwd.getpwuid(userid).pw_name
        except KeyError:
            _users[userid] = str(userid)
    return _users[userid]


def job_values(job: dict, hosts: list[str], now: float) -> dict:
    """Every format field of one job, from its `job-manager.list` entry; `hosts` is
    every rank's host name (the decoded `hostlist` attribute), or [] to leave the
    nodelist empty."""
    state, result = job["state"], job.get("result") or ""
    active = state != st.INACTIVE
    ranks = job.get("ranks") or ""
    if ranks and ("," in ranks or "-" in ranks):
        ranks = f"[{ranks}]"  # Flux's bracketed idset
    nodelist = hostlist.of_ranks(hosts, sorted(idset.decode(job.get("ranks") or ""))) \
        if hosts else ""
    t_run = job.get("t_run") or 0.0
    end = job.get("t_cleanup") or job.get("t_inactive") or now
    runtime = max(0.0, end - t_run) if t_run else 0.0
    remaining = 0.0
    if state == st.RUN and job.get("expiration"):
        remaining = max(0.0, job["expiration"] - now)
    ex = job.get("exception") or {}
    uri = (job.get("memo") or {}).get("uri", "")
    if state in st.PENDING:
        info = {st.PRIORITY: "priority-wait",
                st.DEPEND: "depends:" + _dependencies(job.get("dependencies") or []),
                st.SCHED: "held" if job.get("priority") == 0 else ""}.get(state, "")
        ctime = job.get("duration") or 0.0
    else:
        info, ctime = nodelist, runtime
    name = username(job["userid"])
    rc = job.get("returncode")
    return {
        "id": fluid.f58(job["id"]), "id.f58": fluid.f58(job["id"]),
        "id.f58plain": fluid.f58_plain(job["id"]), "id.dec": job["id"],
        "id.hex": f"{job['id']:#018x}", "id.dothex": fluid.dothex(job["id"]),
        "id.kvs": "job." + fluid.dothex(job["id"]),
        "userid": job["userid"], "username": name, "user": name,
        "urgency": job.get("urgency", ""), "priority": _priority(job),
        "name": job.get("name") or "", "state": state, "state_single": st.ABBREV[state],
        "status": state if active else result,
        "status_abbrev": st.ABBREV[state] if active else st.RESULT_ABBREV.get(result, result),
        "result": result, "result_abbrev": st.RESULT_ABBREV.get(result, ""),
        **st.emoji(state, result, active, sys.stdout.encoding),
        "returncode": "" if rc is None else rc,
        "waitstatus": "" if job.get("waitstatus") is None else job["waitstatus"],
        "exception.occurred": bool(ex.get("occurred")),
        "exception.severity": ex.get("severity", ""), "exception.type": ex.get("type", ""),
        "exception.note": ex.get("note", ""),
        "ntasks": "" if job.get("ntasks") is None else job["ntasks"],
        "nnodes": job.get("nnodes") or "", "ncores": job.get("ncores") or "",
        "ranks": ranks, "nodelist": nodelist, "runtime": runtime,
        "t_submit": job.get("t_submit") or 0.0, "t_run": t_run,
        "t_cleanup": job.get("t_cleanup") or 0.0, "t_inactive": job.get("t_inactive") or 0.0,
        "duration": job.get("duration") or 0.0, "expiration": job.get("expiration") or 0.0,
        "t_remaining": remaining, "uri": uri, "uri.local": uri,
        "instance": "yes" if job.get("instance") else "", "depth": job.get("depth") or "",
        "contextual_time": ctime, "contextual_info": info,
        "dependencies": _dependencies(job.get("dependencies") or []),
        "success": "" if active else result == "COMPLETED",
        "inactive_reason": inactive_reason(job), "queue": job.get("queue") or "",
        "cwd": job.get("cwd") or "", "t_depend": job.get("t_submit") or 0.0,
        "annotations": json.dumps(job["annotations"]) if job.get("annotations") else "",
    }


class _JobsCommand(click.Command):
    """`jobs`, whose -w/--width takes an optional value that may be negative (click
    reads `--width=-1` as an option): a negative width is spelled `off` first."""

    def parse_args(self, ctx, args):
        out, after = [], None
        for a in args:
            if after is not None and _negative(a):
                a = "off"
            elif a.startswith("--width=") and _negative(a[8:]):
                a = "--width=off"
            elif a.startswith("-w") and len(a) > 2 and _negative(a[2:]):
                a = "-woff"
            after = a if a in ("-w", "--width") else None
            out.append(a)
        return super().parse_args(ctx, out)


def _negative(text: str) -> bool:
    return text.startswith("-") and text[1:].isdigit()


def _width(ctx, param, value):
    if value is None or value == "off":
        return None if value is None else -1
    try:
        return int(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a number") from None


def _color(ctx, param, value):
    if value is not None and value not in ("always", "never", "auto"):
        raise click.BadParameter(f"invalid argument {value!r}: always, never or auto")
    return value


@click.command(cls=_JobsCommand, context_settings=HELP)
@click.option("-a", "show_all", is_flag=True, help="List all jobs, inactive ones too.")
@click.option("-f", "--filter", "words", default=None, callback=filter_option, metavar="STATE,...",
              help="Only jobs in these states or with these results: pending, running, "
                   "active, inactive, a state (sched, run, ...) or a result "
                   "(completed, failed, canceled, timeout).  Implies -a.")
@click.option("-A", "all_users", is_flag=True, help="List the jobs of all users (-u all).")
@click.option("-u", "--user", "userid", default=None, callback=user_option, metavar="USER|all",
              help="List this user's jobs (a name or uid), or all users' (default: yours).")
@click.option("--stats", is_flag=True,
              help="Print a summary of every job in the instance before the list.")
@click.option("--stats-only", is_flag=True,
              help="Print only the summary; exit 0 if some job is active, else 1.")
@click.option("--sort", "sort_keys", default=None, callback=_sort_keys, metavar="KEY[,-KEY]",
              help="Sort by these fields (a leading - sorts that one in descending "
                   "order), e.g. --sort=-priority,id.")
@click.option("-c", "--count", type=click.IntRange(0, None), default=0,
              help="Show at most N jobs (0: no limit).")
@click.option("-n", "--no-header", "--suppress-header", "no_header", is_flag=True,
              help="Do not print the header line.")
@click.option("-o", "--format", "fmt", default="default", metavar="FORMAT",
              help="A named format (default, long) or a format string such as "
                   "'{id} {name:<10.10+} {status} {returncode} {exception.type}'.")
@click.option("--json", "as_json", is_flag=True, help="Print {\"jobs\": [...]} as JSON.")
@click.option("--instances", is_flag=True,
              help="Only jobs that are fluxlite instances (batch/alloc), with their size "
                   "(NNODES), DEPTH (nesting level) and URI.")
@click.option("-q", "--queue", "queues", default=None, metavar="QUEUE,...",
              help="Only jobs submitted to these queues.")
@click.option("--name", default=None, metavar="NAME", help="Only jobs of this name.")
@click.option("--since", default=None, callback=since_option, metavar="WHEN",
              help="Only jobs active since WHEN: -FSD (-1h: the last hour) or a date and "
                   "time (YYYY-MM-DD[ HH:MM[:SS]], HH:MM, yesterday...).  Implies -a.")
@click.option("-i", "--include", default=None, metavar="HOSTS|RANKS",
              help="Only jobs that ran on these hosts (a hostlist) or broker ranks "
                   "(an idset).")
@click.option("-w", "--width", is_flag=False, flag_value="0", default=None, callback=_width,
              metavar="[N]", help="Cut lines at N characters (0, the default with no N: "
                                  "the terminal's width; below 0: no cut, as without -w).")
@click.option("--color", is_flag=False, flag_value="auto", default=None, callback=_color,
              metavar="[WHEN]", help="always, never or auto (accepted: the table is "
                                     "not colored here).")
@click.option("-R", "--recursive", is_flag=True,
              help="Also list the jobs of each running instance of yours, under its job "
                   "id path, down to --level.")
@click.option("--recurse-all", is_flag=True,
              help="-R into other users' instances too (where they let you connect).")
@click.option("-L", "--level", type=click.IntRange(0, None), default=None, metavar="N",
              help="With -R, descend at most N levels (0: as without -R).")
@click.option("--threads", type=click.IntRange(1, None), default=None, metavar="N",
              help="Accepted (the instances are asked one after another here).")
@click.argument("jobids", nargs=-1)
def jobs(stats_only, instances, fmt, as_json, jobids, recurse_all, **params):
    """List jobs: by default your pending and running ones, in Flux's order (pending by
    priority, then running, then inactive, latest first).

    With JOBIDS, list only those jobs (in any state, of any user); an unknown id
    is an error (exit 1), after the known ones are listed.
    """
    if stats_only:
        with handle() as h:
            line, active = stats_line(h)
        click.echo(line)
        raise SystemExit(0 if active else 1)
    if instances and fmt == "default":
        fmt = "instances"
    params.pop("color")
    params.pop("threads")
    params.update(instances=instances, recurse_all=recurse_all,
                  recursive=params["recursive"] or recurse_all)
    out = None if as_json else OutputFormat(fmt, Headings(HEADINGS), FORMATS)
    ids = [parse_jobid(j) for j in jobids]
    with handle() as h:
        summary = stats_line(h)[0] if params["stats"] else None
        found, rows, unknown = _listing(h, params, out, ids)
        if summary is not None:
            click.echo(summary)
        if as_json:
            listed = _json_jobs(h, found, rows, params, 0)
            if found or not unknown:
                click.echo(json.dumps({"jobs": listed}))
        else:
            out.fit(rows)
            lines = [out.format(values) for values in rows]  # a bad spec fails first
            if not params["no_header"] and (found or not unknown):
                _echo(out.header(), params["width"])
            _print_rows(h, found, rows, params, out, "", 0, lines)
    if unknown:  # the known ones are listed all the same, as Flux does
        raise NotFound(f"unknown job id{'s' if len(unknown) > 1 else ''} "
                       f"{', '.join(fluid.f58(i) for i in unknown)}")


def _listing(h, params: dict, out, ids: list[int]) -> tuple[list, list, list]:
    """The jobs of the instance at `h` that the options select, in order; the values of
    each; and the JOBIDS not found."""
    which = "all" if params["show_all"] or params["words"] or ids or \
        params["since"] is not None else "active"
    found = api.list_jobs(h, which, ids=ids,
                          userid=None if params["all_users"] else params["userid"])
    sort_keys = params["sort_keys"] or (_sort_keys(None, None, out.sort_keys)
                                        if out is not None else [])
    need_host = out is None or params["include"] is not None or \
        {"nodelist", "contextual_info"} & (set(out.fields) | {k for k, _ in sort_keys})
    hosts = api.hosts(h) if need_host and found else []
    known = {j["id"] for j in found}
    unknown = list(dict.fromkeys(i for i in ids if i not in known))
    found = [j for j in found if selected(j, params, hosts)]
    now = time.time()
    pairs = [(j, job_values(j, hosts, now)) for j in flux_order(found)]
    if out is not None:
        _extra_fields(out, pairs)
    if sort_keys:
        pairs = _sort(pairs, sort_keys)
    if params["count"]:
        pairs = pairs[:params["count"]]
    return [p[0] for p in pairs], [p[1] for p in pairs], unknown


def _extra_fields(out, pairs: list) -> None:
    """The fields computed only when the format asks: annotations.*, id.words."""
    for field in [f for f in out.fields if _is_annotation(f)]:
        for j, values in pairs:
            values[field] = _annotation(j, field)
    if "id.emoji" in out.fields:
        for j, values in pairs:
            values["id.emoji"] = fluid.emoji(j["id"])
    if "id.words" in out.fields:   # only when asked: one import
        for j, values in pairs:
            values["id.words"] = fluid.words(j["id"])


def _echo(line: str, width: int | None) -> None:
    """One line, cut at -w's width (0: the terminal's; below 0 or no -w: uncut)."""
    if width is not None and width >= 0:
        if width == 0:
            width = os.get_terminal_size().columns if sys.stdout.isatty() else -1
        if width > 0:
            line = line[:width]
    click.echo(line)


def _children(found: list, rows: list, params: dict, level: int) -> list[tuple[dict, str]]:
    """-R: the running instances among `found` to descend into (theirs, or anyone's with
    --recurse-all), with their URIs; none past --level."""
    if not params["recursive"] or params["level"] == level:
        return []
    return [(j, v["uri"]) for j, v in zip(found, rows)
            if v.get("uri") and j["state"] in st.RUNNING
            and (params["recurse_all"] or j.get("userid") == os.getuid())]


def _descend(uri: str, params: dict, out):
    """The listing of the instance at `uri` (None when it cannot be reached), and its
    handle for further descent; JOBIDS do not apply below the top."""
    from ..client.sync import Handle
    from ..errors import FluxliteError
    try:
        child = Handle(uri)
        return child, _listing(child, params, out, [])
    except FluxliteError:
        return None, None


def _print_rows(h, found, rows, params, out, path: str, level: int, lines=None) -> None:
    if lines is None:
        lines = [out.format(values) for values in rows]
    for line in lines:
        _echo(line, params["width"])
    for job, uri in _children(found, rows, params, level):
        child, listing = _descend(uri, params, out)
        if child is None:
            continue
        with child:
            this = f"{path}/{fluid.f58(job['id'])}" if path else fluid.f58(job["id"])
            click.echo(f"\n{this}:")
            if params["stats"]:
                s = api.stats(child)
                click.echo(f"{s['running']} running, {s['successful']} completed, "
                           f"{s['failed']} failed, {s['pending']} pending")
            _print_rows(child, listing[0], listing[1], params, out, this, level + 1)


def _json_jobs(h, found, rows, params, level: int) -> list[dict]:
    keep = ("id.f58", "username", "status", "runtime", "nodelist")
    listed = [dict(j, **{k.replace(".", "_"): v[k] for k in keep}) for j, v in zip(found, rows)]
    by_id = {d["id"]: d for d in listed}
    for job, uri in _children(found, rows, params, level):
        child, listing = _descend(uri, params, None)
        if child is not None:
            with child:
                by_id[job["id"]]["jobs"] = _json_jobs(child, listing[0], listing[1], params,
                                                      level + 1)
    return listed
