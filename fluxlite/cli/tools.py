"""Flux's smaller utility commands: version, hostlist, env, logger, event pub/sub,
pgrep and pkill (config, module and jobtap have their own files).

Each prints what its flux(1) namesake prints (flux-core's doc/man1) and exits
as it does; each reaches the instance only through service methods
(`log.append`, `event.publish`/`event.subscribe`, `job-manager.list`).
"""

from __future__ import annotations

import json
import os
import sys

import click

from ..errors import FluxliteError, UsageError
from .common import HELP, NO_INTERSPERSED, handle


# --------------------------------------------------------------------- version
@click.command(context_settings=HELP)
def version():
    """Print the versions of the commands, the broker (inside an instance) and the
    libraries, one 'NAME:<tabs>VERSION' line each, as flux version."""
    from importlib.metadata import version as dist_version

    import zmq
    mine = dist_version("fluxlite")
    uri = os.environ.get("FLUXLITE_URI")
    click.echo(f"commands:    \t\t{mine}")       # in flux version's order
    click.echo(f"python:      \t\t{sys.version.split()[0]}")
    if uri:
        click.echo(f"broker:  \t\t{mine}")
        click.echo(f"FLUXLITE_URI:\t\t{uri}")
    click.echo(f"build-options:\t\t+zmq=={zmq.zmq_version()}+pyzmq=={zmq.__version__}")


# -------------------------------------------------------------------- logger
SEVERITIES = ("emerg", "alert", "crit", "err", "warning", "notice", "info", "debug")


@click.command(context_settings=HELP)
@click.option("-s", "--severity", default="notice", show_default=True,
              type=click.Choice(SEVERITIES), help="How severe the message is.")
@click.option("-n", "--appname", default="logger", show_default=True,
              help="Name shown before the level in `fluxlite dmesg`.")
@click.argument("message", nargs=-1, required=True)
def logger(severity, appname, message):
    """Write MESSAGE to the local broker's log, at a syslog severity (shown by
    `fluxlite dmesg` as APPNAME.LEVEL[RANK]: MESSAGE)."""
    with handle() as h:
        h.call("log.append", {"appname": appname, "severity": severity,
                              "message": " ".join(message)})


# ---------------------------------------------------------------------- event
@click.group(context_settings=HELP)
def event():
    """Publish and watch events: pub, sub."""


@event.command("pub", context_settings=HELP)
@click.option("-r", "--raw", is_flag=True,
              help="PAYLOAD is bytes as given (no NUL added), not a string payload.")
@click.option("-s", "--synchronous", is_flag=True, help="Print the event's seq=N.")
@click.option("-l", "--loopback", is_flag=True, help="Return once the event came back.")
@click.option("-p", "--private", is_flag=True,
              help="Accepted for Flux scripts (only the instance owner sees events here).")
@click.argument("topic")
@click.argument("payload", nargs=-1)
def event_pub(raw, synchronous, loopback, private, topic, payload):
    """Publish an event TOPIC to the whole instance, with an optional PAYLOAD (its
    words joined by spaces): a string payload, JSON or not, as Flux's (-r: bytes)."""
    from ..protocol.message import event_publish_payload
    del private   # events here reach only the instance owner's clients anyway
    text = " ".join(payload)
    # the payload's bytes as flux-event sends them: the text with its NUL (a string
    # payload, which Flux does not check is JSON), or with -r the bytes as they are
    body = (os.fsencode(text) + (b"" if raw else b"\0")) if text else None
    with handle() as h:
        got = []
        if loopback:
            h.on_event = lambda msg: got.append(msg) if msg.topic == topic else None
            h.subscribe(topic)
        r = h.call("event.publish", event_publish_payload(topic, body),
                   nodeid=0 if synchronous else None)
        if loopback:
            h.run_until(lambda: got)
        if synchronous and "seq" in r:
            click.echo(f"seq={r['seq']}")


@event.command("sub", context_settings=HELP)
@click.option("-c", "--count", type=click.IntRange(0), default=0,
              help="Exit after N events (default: until interrupted).")
@click.argument("topics", nargs=-1)
def event_sub(count, topics):
    """Print each event whose topic begins with one of TOPICS (all events without
    any) as 'TOPIC<tab>PAYLOAD', until interrupted or COUNT events."""
    seen = [0]

    def show(msg):
        sys.stdout.buffer.write(msg.topic.encode() + b"\t" + _event_text(msg) + b"\n")
        sys.stdout.flush()
        seen[0] += 1

    with handle() as h:
        h.on_event = show
        for t in topics or ("",):
            h.subscribe(t)
        try:
            h.run_until(lambda: (count and seen[0] >= count) or not h.connected)
        except KeyboardInterrupt:
            return 0
    return 0


def _event_text(msg) -> bytes:
    """An event's payload as flux event sub prints it: a string payload (NUL-ended)
    as its text, raw bytes with each unprintable byte as '.', an instance's own
    event as its compact JSON."""
    raw = msg.published
    if raw is None:
        value = msg.payload
        if value is None:
            return b""
        raw = value if isinstance(value, bytes) else \
            (value if isinstance(value, str) else
             json.dumps(value, separators=(",", ":"))).encode() + b"\0"
    if not raw or raw.endswith(b"\0"):
        return raw.partition(b"\0")[0]
    return bytes(c if 0x20 <= c < 0x7f else 0x2e for c in raw)


# -------------------------------------------------------------------- hostlist
SOURCES_HELP = """SOURCES: instance (every rank's host), local (the job's hosts when
FLUXLITE_JOB_ID is set, else instance), avail (instance less down or drained
ranks), a job id (its hosts), stdin or '-', or a literal hostlist such as
node[1-4].  Without SOURCES: stdin, or local with -l."""


@click.command(context_settings=HELP, epilog=SOURCES_HELP)
@click.option("-e", "--expand", is_flag=True, help="Print every host, separated by -d.")
@click.option("-d", "--delimiter", default=" ", metavar="S",
              help="Separator for --expand (default ' '; '\\n' for one per line).")
@click.option("-c", "--count", is_flag=True, help="Print the number of hosts.")
@click.option("-n", "--nth", default=None, metavar="[-]IDS",
              help="Only the hosts at these indices (-IDS: counted from the end).")
@click.option("-F", "--find", default=None, metavar="HOSTS",
              help="Print the indices of HOSTS in the result (fail if one is missing).")
@click.option("-L", "--limit", type=int, default=None, metavar="N",
              help="At most N hosts (-N: the last N).")
@click.option("-S", "--sort", "sort_", is_flag=True, help="Sort the result.")
@click.option("-x", "--exclude", default=None, metavar="IDS|HOSTS",
              help="Remove these hosts (or, if none is there, these indices).")
@click.option("-u", "--union", "--unique", "union", is_flag=True,
              help="Each host once (with several SOURCES: their union).")
@click.option("-i", "--intersect", is_flag=True, help="Hosts in every SOURCE.")
@click.option("-m", "--minus", is_flag=True, help="The first SOURCE less the others.")
@click.option("-X", "--xor", is_flag=True, help="Hosts in exactly one of the SOURCES.")
@click.option("-f", "--fallback", is_flag=True,
              help="A job id that is not found is taken as a host name.")
@click.option("-l", "--local", is_flag=True, help="Default SOURCE: local, not stdin.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing; exit 1 if the result is empty.")
@click.argument("sources", nargs=-1)
def hostlist(expand, delimiter, count, nth, find, limit, sort_, exclude, union, intersect,
             minus, xor, fallback, local, quiet, sources):
    """Combine and transform hostlists, as flux hostlist: print the result as a
    compressed hostlist (node[1-4]) or, with -e, host by host."""
    from . import hostlists
    if expand and count:
        raise UsageError("--expand and --count do not go together")
    if sum((intersect, minus, xor)) > 1:
        raise UsageError("give one of --intersect, --minus, --xor")
    lists = hostlists.resolve(sources or (("local",) if local else ("stdin",)), fallback)
    hosts = hostlists.combine(lists, intersect=intersect, minus=minus, xor=xor)
    hosts = hostlists.transform(hosts, exclude=exclude, sort=sort_, unique=union,
                                limit=limit, nth=nth)
    if not quiet:
        hostlists.show(hosts, find=find, count=count, expand=expand, delimiter=delimiter)
    if quiet and not hosts:
        sys.exit(1)


# ------------------------------------------------------------------------ env
@click.command(context_settings=NO_INTERSPERSED)
@click.argument("command", nargs=-1)
def env(command):
    """Print, as shell `export` lines, the environment fluxlite gives the commands it
    runs (FLUXLITE_URI inside an instance, PATH with fluxlite first), or run
    COMMAND in it."""
    envs = dict(os.environ)
    here = os.path.dirname(os.path.abspath(sys.argv[0])) if sys.argv and sys.argv[0] else ""
    path = envs.get("PATH", "")
    if here and here not in path.split(os.pathsep):
        path = here + (os.pathsep + path if path else "")
    set_here = {"PATH": path}
    if envs.get("FLUXLITE_URI"):
        set_here["FLUXLITE_URI"] = envs["FLUXLITE_URI"]
    if not command:
        for k, v in set_here.items():
            click.echo(f'export {k}="{v}"')
        return 0
    envs.update(set_here)
    sys.stdout.flush()
    try:
        os.execvpe(command[0], list(command), envs)
    except OSError as exc:
        raise FluxliteError(f"{command[0]}: {exc.strerror}",
                            exit_code=127 if isinstance(exc, FileNotFoundError) else 126
                            ) from None


# -------------------------------------------------------------- pgrep, pkill
def _pgrep_options(fn):
    for opt in reversed([
        click.option("-a", "all_states", is_flag=True, help="Jobs in every state."),
        click.option("-A", "all_users", is_flag=True, help="Every user's jobs."),
        click.option("-u", "--user", default=None, metavar="USER|all",
                     help="This user's jobs (a name or uid), or all users'."),
        click.option("-f", "--filter", "filters", default=None, metavar="STATE|RESULT,...",
                     help="Jobs in these states or with these results (default: pending "
                          "and running)."),
        click.option("-c", "--count", type=click.IntRange(1), default=99999,
                     help="At most N matches."),
        click.option("--max-entries", type=click.IntRange(1), default=1000,
                     help="Search at most N jobs."),
        click.option("-q", "--queue", "queues", multiple=True, metavar="QUEUE[,...]",
                     help="Only jobs in these queues (repeatable)."),
    ]):
        fn = opt(fn)
    return fn


@click.command(context_settings=HELP)
@_pgrep_options
@click.option("-n", "--no-header", is_flag=True, help="Do not print a header line.")
@click.option("-o", "--format", "fmt", default="{id.f58}", metavar="FORMAT",
              help="An output format, as `fluxlite jobs -o` (named: full, long, deps); "
                   "default {id.f58}, one id per line.")
@click.argument("expression", nargs=-1, required=True)
def pgrep(all_states, all_users, user, filters, count, max_entries, queues, no_header, fmt,
          expression):
    """List the jobs whose name matches EXPRESSION (a regular expression, or
    name:REGEX), or whose id lies in ID..ID.  Exit 1 if none matches."""
    from .jobmatch import PGREP_FORMATS, find_jobs, print_jobs
    with handle() as h:
        found = find_jobs(h, expression, all_states=all_states, all_users=all_users,
                          user=user, filters=filters, count=count, max_entries=max_entries,
                          queues=queues)
        if not found:
            sys.exit(1)
        header = not no_header and fmt != "{id.f58}"
        print_jobs(h, found, PGREP_FORMATS.get(fmt, fmt), header)


@click.command(context_settings=HELP)
@_pgrep_options
@click.option("-w", "--wait", is_flag=True, help="Wait for the canceled jobs to finish.")
@click.argument("expression", nargs=-1, required=True)
def pkill(all_states, all_users, user, filters, count, max_entries, queues, wait, expression):
    """Cancel the jobs whose name matches EXPRESSION (or whose id lies in ID..ID),
    then say how many.  Exit 1 if none matches or a cancel failed."""
    from ..jobapi import api
    from ..util import fluid
    from .jobmatch import find_jobs
    with handle() as h:
        found = find_jobs(h, expression, all_states=all_states, all_users=all_users,
                          user=user, filters=filters, count=count, max_entries=max_entries,
                          queues=queues)
        if not found:
            sys.exit(1)
        done, code = 0, 0
        for job in found:
            try:
                api.cancel(h, job["id"])
                done += 1
            except FluxliteError as exc:
                code = 1
                print(f"fluxlite pkill: {fluid.f58(job['id'])}: cancel: {exc.message}",
                      file=sys.stderr)
        if wait:
            for job in found:
                for _ in api.event_watch(h, job["id"]):   # to the end of its eventlog
                    pass
    print(f"fluxlite pkill: Canceled {done} job{'s' if done != 1 else ''}", file=sys.stderr)
    sys.exit(code)
