"""More `fluxlite job` subcommands, as flux-job(1) has them: submit FILE, taskmap,
timeleft, hostpids, memo, namespace.  job.py adds COMMANDS to its `job` group."""

from __future__ import annotations

import json
import os
import re
import sys

import click

from ..errors import FluxliteError, NotFound, UsageError
from .common import HELP, fsd_timeout, handle, parse_jobid
from .common import JOB_JOBID as JOBID  # flux-job's words and exit status for a bad id
from .optvalues import json_or_text, put_dotted

UINT_MAX = 4294967295   # what Flux's timeleft reports for no limit


# -------------------------------------------------------------------- submit
@click.command("submit", context_settings=HELP)
@click.option("-u", "--urgency", type=click.IntRange(0, 31), default=16, show_default=True,
              help="Urgency: 0 holds the job, 31 expedites it.")
@click.option("-f", "--flags", default="", metavar="FLAGS",
              help="Comma-separated flags: waitable (a `job wait` may reap it); debug, "
                   "signed and novalidate are accepted.")
@click.option("-c", "--security-config", metavar="PATTERN", default=None,
              help="flux-security's config (Flux's): accepted; nothing is signed here.")
@click.option("-s", "--sign-type", metavar="TYPE", default=None,
              help="How J is signed (Flux's): accepted; J is sent unsigned, as a "
                   "single-user instance takes it.")
@click.argument("file", required=False, type=click.Path(dir_okay=False, allow_dash=True))
def submit_file(urgency, flags, security_config, sign_type, file):
    """Submit the jobspec in FILE (JSON or YAML; stdin without FILE or with -), and
    print the job's id."""
    del security_config, sign_type  # Flux's signing options: nothing is signed here
    from ..jobapi import api
    from ..util import fluid
    known = {"waitable": 1, "debug": 0, "signed": 0, "novalidate": 0}
    mask = 0
    for word in filter(None, (w.strip() for w in flags.split(","))):
        if word not in known:
            raise UsageError(f"--flags: unknown flag {word!r}: expected some of "
                             + ", ".join(known))
        mask |= known[word]
    spec = read_jobspec(file)
    with handle() as h:
        r = h.call(*api.submit_request(spec, urgency, mask))
    click.echo(fluid.f58(r["id"]))


def read_jobspec(path: str | None) -> dict:
    """A jobspec from a file or stdin: JSON, or YAML (of which JSON is a part)."""
    try:
        if path in (None, "-"):
            text = sys.stdin.read()
            where = "stdin"
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
            where = path
    except OSError as exc:
        raise FluxliteError.from_oserror(exc, f"cannot read {path}") from None
    try:
        spec = json.loads(text)
    except ValueError:
        import yaml
        try:
            spec = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            first = str(exc).splitlines()[0] if str(exc) else "parse error"
            raise UsageError(f"{where}: not a JSON or YAML jobspec: {first}") from None
    if not isinstance(spec, dict):
        raise UsageError(f"{where}: a jobspec is a JSON or YAML object (with version, "
                         "resources, tasks, attributes)")
    return spec


# ------------------------------------------------------------------- taskmap
from ..job.taskmap import from_nodes as taskmap_from_nodes  # noqa: E402
from ..job.taskmap import nodes as taskmap_nodes  # noqa: E402


def parse_taskmap(text: str) -> dict:
    """An RFC 34 taskmap given as JSON, raw ("0-1;2-3") or PMI ("(vector,(0,2,2))")."""
    from ..util import idset
    t = text.strip()
    if t.startswith("{"):
        try:
            tm = json.loads(t)
            taskmap_nodes(tm)
            return tm
        except (ValueError, KeyError, TypeError):
            raise UsageError(f"invalid taskmap {text!r}") from None
    if t.startswith("(vector,"):
        blocks = re.findall(r"\((\d+),(\d+),(\d+)\)", t)
        if not blocks:
            raise UsageError(f"invalid PMI taskmap {text!r}")
        return {"version": 1, "map": [[int(a), int(b), int(c), 1] for a, b, c in blocks]}
    try:
        per_node = [idset.decode(part) for part in t.split(";")]
    except ValueError:
        raise UsageError(f"invalid taskmap {text!r}: expected a JOBID, RFC 34 JSON, "
                         "raw (0-1;2-3) or PMI ((vector,(0,2,2)))") from None
    owner = {task: node for node, tasks in enumerate(per_node) for task in tasks}
    if (sorted(owner) != list(range(len(owner)))
            or sum(len(tasks) for tasks in per_node) != len(owner)):
        raise UsageError(f"invalid raw taskmap {text!r}: each task id 0..N-1 once")
    return taskmap_from_nodes([owner[t] for t in range(len(owner))])


def _job_taskmap(h, jobid: int) -> dict:
    from ..jobapi import api
    api.info(h, jobid)
    for e in api.event_watch(h, jobid, "exec"):
        if e.get("name") == "shell.start":
            return (e.get("context") or {}).get("taskmap") or {"version": 1, "map": []}
    raise NotFound("job never started its tasks: no taskmap")


@click.command("taskmap", context_settings=HELP)
@click.option("--taskids", type=click.IntRange(0), default=None, metavar="NODEID",
              help="Print the idset of the tasks on node NODEID.")
@click.option("--ntasks", type=click.IntRange(0), default=None, metavar="NODEID",
              help="Print how many tasks ran on node NODEID.")
@click.option("--nodeid", type=click.IntRange(0), default=None, metavar="TASKID",
              help="Print the node id of task TASKID.")
@click.option("--hostname", type=click.IntRange(0), default=None, metavar="TASKID",
              help="Print the host name of the node of task TASKID (a job's map only).")
@click.option("--to", type=click.Choice(["raw", "pmi", "multiline", "hosts"]), default=None,
              help="Print the map as raw (0-1;2-3), pmi ((vector,(0,2,2))), multiline "
                   "(TASKID: NODEID per line) or hosts (HOST: TASKIDS per host).")
@click.argument("target", metavar="JOBID|TASKMAP")
def taskmap(taskids, ntasks, nodeid, hostname, to, target):
    """Print a job's task map (RFC 34, from its shell.start event), or convert a map
    given as JSON, raw or PMI; one option at most."""
    chosen = [o for o in (taskids, ntasks, nodeid, hostname, to) if o is not None]
    if len(chosen) > 1:
        raise UsageError("only one of --taskids, --ntasks, --nodeid, --hostname, --to")
    tm, hosts = _taskmap_and_hosts(target, hostname is not None or to == "hosts")
    view = _TaskmapView(tm, hosts)
    if taskids is not None:
        from ..util import idset
        click.echo(idset.encode(view.tasks_on(taskids)))
    elif ntasks is not None:
        click.echo(str(len(view.tasks_on(ntasks))))
    elif nodeid is not None:
        click.echo(str(view.node_of(nodeid)))
    elif hostname is not None:
        click.echo(view.hosts_or_fail("--hostname")[view.node_of(hostname)])
    else:
        click.echo(view.convert(to))


def _taskmap_and_hosts(target: str, want_hosts: bool) -> tuple[dict, list[str]]:
    """The map of job `target` (with its hosts in node order when wanted), or the map
    `target` is, given as JSON, raw or PMI (no hosts)."""
    try:
        jobid = parse_jobid(target)
    except UsageError:
        return parse_taskmap(target), []
    from ..jobapi import api
    from ..util import idset
    with handle() as h:
        tm = _job_taskmap(h, jobid)
        if not want_hosts:
            return tm, []
        info = api.list_jobs(h, "all", ids=[jobid])[0]
        every = api.hosts(h)
        return tm, [every[r] for r in sorted(idset.decode(info.get("ranks") or ""))]


class _TaskmapView:
    """One task map read by task (its node) and by node (its tasks)."""

    def __init__(self, tm: dict, hosts: list[str]):
        self.tm = tm
        self.hosts = hosts
        self.nodes = taskmap_nodes(tm)
        self.nnodes = max(self.nodes) + 1 if self.nodes else 0
        self.per_node = [[t for t, n in enumerate(self.nodes) if n == node]
                         for node in range(self.nnodes)]

    def node_of(self, task: int) -> int:
        if task >= len(self.nodes):
            raise UsageError(f"task {task} is not in the map ({len(self.nodes)} tasks)")
        return self.nodes[task]

    def tasks_on(self, node: int) -> list[int]:
        if node >= self.nnodes:
            raise UsageError(f"node {node} is not in the map ({self.nnodes} nodes)")
        return self.per_node[node]

    def hosts_or_fail(self, option: str) -> list[str]:
        if not self.hosts:
            raise UsageError(f"{option} needs a JOBID (a map alone names no hosts)")
        return self.hosts

    def convert(self, to: str | None) -> str:
        """The whole map in the form --to names (RFC 34 JSON without it)."""
        from ..util import idset
        if to == "raw":
            return ";".join(idset.encode(t) for t in self.per_node)
        if to == "pmi":
            parts = [f"({s},{n},{p})" for s, n, p, rep in self.tm["map"] for _ in range(rep)]
            return f"(vector,{','.join(parts)})"
        if to == "multiline":
            return "\n".join(f"{t}: {n}" for t, n in enumerate(self.nodes))
        if to == "hosts":
            by_host: dict[str, list[int]] = {}
            for node, tasks in enumerate(self.per_node):
                by_host.setdefault(self.hosts_or_fail("--to=hosts")[node], []).extend(tasks)
            return "\n".join(f"{host}: {idset.encode(tasks)}" for host, tasks in by_host.items())
        return json.dumps(self.tm, separators=(",", ":"))


# ------------------------------------------------------------------ timeleft
@click.command("timeleft", context_settings=HELP)
@click.option("-H", "--human", is_flag=True, help="As a Flux Standard Duration.")
@click.argument("jobid", type=JOBID, required=False)
def timeleft(human, jobid):
    """Print the whole seconds left before the time limit of JOBID (default: the job
    this runs in, else the instance itself as a job of its parent): 0 once expired
    or finished, 4294967295 (or infinity with -H) with no limit."""
    import time

    from ..job import states
    from ..jobapi import api
    from ..util import fluid
    uri = None
    if jobid is None:
        own = os.environ.get("FLUXLITE_JOB_ID") or os.environ.get("FLUX_JOB_ID")
        if own:
            jobid = parse_jobid(own)
        else:
            with handle() as h:
                parent = h.getattr("parent-uri")
                mine = h.getattr("jobid")
            if not parent or not mine:
                _left(None, human)
                return
            uri, jobid = parent, parse_jobid(mine)
    with handle(uri) as h:
        info = api.info(h, jobid)
        listed = api.list_jobs(h, "all", ids=[jobid])
    state = info["state"]
    if state in states.PENDING:
        raise UsageError(f"job {fluid.f58(jobid)} has not started")
    if state not in states.RUNNING:
        _left(0.0, human)
        return
    expiration = (listed[0].get("expiration") if listed else None) or 0.0
    _left(max(0.0, expiration - time.time()) if expiration else None, human)


def _left(secs: float | None, human: bool) -> None:
    from ..util import fsd
    if secs is None:
        click.echo("infinity" if human else str(UINT_MAX))
    elif human:
        click.echo(fsd.format(secs))
    else:
        click.echo(str(int(secs)))


# ---------------------------------------------------------------------- memo
@click.command("memo", context_settings=HELP)
@click.option("--volatile", is_flag=True,
              help="Accepted for Flux scripts (memos are kept with the job here).")
@click.argument("jobid", type=JOBID)
@click.argument("pairs", nargs=-1, required=True, metavar="KEY=VALUE...")
def memo(volatile, jobid, pairs):
    """Attach KEY=VALUE memos to a job (VALUE as JSON if it parses, else a string; '-'
    reads it from stdin); `jobs -o '{user.KEY}'` ... shows them."""
    del volatile   # a memo here lives as long as the job's record
    updates: dict = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"expected KEY=VALUE, got {pair!r}")
        if text == "-":
            text = sys.stdin.read()
        put_dotted(updates, key, json_or_text(text))
    with handle() as h:
        h.call("job-manager.memo", {"id": jobid, "memo": updates})


# ------------------------------------------------------------------ hostpids
@click.command("hostpids", context_settings=HELP)
@click.option("-d", "--delimiter", default=",", show_default=True, metavar="STRING",
              help="Between HOST:PID pairs.")
@click.option("-r", "--ranks", default=None, metavar="IDSET",
              help="Only these task ranks (default: every task).")
@click.option("-t", "--timeout", callback=fsd_timeout, default=None, metavar="FSD",
              help="Give up after this long waiting for the tasks to start.")
@click.argument("jobid", type=JOBID)
def hostpids(delimiter, ranks, timeout, jobid):
    """Print HOST:PID for every task of a running job, in task order (waiting for a
    pending job's tasks to start)."""
    from ..errors import RPCTimeout
    from ..job import states
    from ..jobapi import api
    from ..util import fluid, idset
    wanted = None
    if ranks is not None:
        try:
            wanted = idset.decode(ranks)
        except ValueError:
            raise UsageError(f"--ranks: {ranks!r} is not an idset") from None
    with handle() as h:
        if api.info(h, jobid)["state"] == states.INACTIVE:
            raise UsageError(f"hostpids: job {fluid.f58(jobid)} is inactive")
        try:
            for e in api.event_watch(h, jobid, "exec", timeout=timeout):
                if e.get("name") == "shell.start":
                    break
            else:
                raise UsageError(f"hostpids: job {fluid.f58(jobid)} never started its tasks")
        except RPCTimeout:
            raise RPCTimeout("hostpids: timeout waiting for shell.start event") from None
        table = h.call("job-exec.proctable", {"id": jobid}, nodeid=0)
    pairs = [f"{host}:{pid}" for rank, (host, pid) in
             enumerate(zip(table["hosts"], table["pids"]))
             if wanted is None or rank in wanted]
    click.echo(delimiter.join(pairs))


@click.command("namespace", context_settings=HELP)
@click.argument("jobid", type=JOBID)
def namespace(jobid):
    """Print the job's KVS guest namespace, job-ID (Flux's name): `kvs -N job-ID`
    reads and writes the job's guest directory (exec.eventlog, output, input)."""
    click.echo(f"job-{jobid}")


COMMANDS = (submit_file, taskmap, timeleft, memo, hostpids, namespace)
