"""Small instance commands: ping, getattr, setattr, lsattr, dmesg, shutdown."""

from __future__ import annotations

import json
import os
import time

import click

from .common import HELP, RANK, handle


@click.command(context_settings=HELP)
@click.option("-c", "--count", type=click.IntRange(0, None), default=0,
              help="Stop after COUNT replies (default: until interrupted).")
@click.option("-i", "--interval", type=click.FloatRange(0, 3600), default=1.0,
              show_default=True, help="Seconds between pings (0: no delay).")
@click.option("-r", "--rank", type=RANK, default=None, help="Rank to ping a SERVICE on.")
@click.option("-p", "--pad", type=click.IntRange(0, 1 << 20), default=0,
              help="Bytes of padding in each ping.")
@click.option("-b", "--batch", is_flag=True,
              help="Send all COUNT pings first, then read the replies (needs --count).")
@click.option("-u", "--userid", is_flag=True,
              help="Show the userid and rolemask each request reached the service with.")
@click.argument("target")
def ping(count, interval, rank, pad, batch, userid, target):
    """Ping TARGET until interrupted: a rank (its broker), a SERVICE (e.g. kvs), or
    RANK!SERVICE (e.g. 1!kvs, the same as --rank 1 kvs).

    Each reply prints RANK!SERVICE.ping pad=N seq=N time=MS ms (ROUTE); Ctrl-C
    stops it (exit 0)."""
    from ..errors import UsageError
    if batch and not count:
        raise UsageError("--batch should only be used with --count")
    nodeid, service = _ping_target(target, rank)
    topic = f"{service}.ping"
    padding = "p" * pad

    def show(seq: int, t0: float, resp) -> None:
        ms = (time.perf_counter() - t0) * 1000
        resp = resp if isinstance(resp, dict) else {}
        where = resp.get("rank", nodeid)
        route = "!".join(str(hop) for hop in resp.get("route", []))
        who = (f" userid={resp.get('userid', 0)} rolemask=0x{resp.get('rolemask', 0):x}"
               if userid else "")
        click.echo(f"{where}!{topic} pad={pad}{who} seq={seq} time={ms:.3f} ms ({route})")

    with handle() as h:
        try:
            if batch:   # as Flux's: every request out (INTERVAL apart), then the replies
                sent = []
                for seq in range(count):
                    sent.append((seq, time.perf_counter(),
                                 h.rpc(topic, {"pad": padding, "seq": seq}, nodeid=nodeid)))
                    if interval and seq + 1 < count:
                        time.sleep(interval)
                for seq, t0, pending in sent:
                    h.wait(pending)
                    show(seq, t0, pending.take())
                return 0
            seq = 0
            while not count or seq < count:
                t0 = time.perf_counter()
                show(seq, t0, h.call(topic, {"pad": padding, "seq": seq}, nodeid=nodeid))
                seq += 1
                if interval and (not count or seq < count):
                    time.sleep(interval)
        except KeyboardInterrupt:
            return 0  # stopped as asked, like ping(8)


def _ping_target(target: str, rank: int | None) -> tuple[int | None, str]:
    """(nodeid, service) from TARGET as flux-ping(1) reads it."""
    from ..errors import UsageError
    prefix, bang, service = target.rpartition("!")
    if bang:
        if rank is not None:
            raise UsageError(f"{target!r} names a rank and so does --rank: give one")
        if prefix == "any":
            return None, service or "broker"
        if not prefix.isdigit():
            raise UsageError(f"invalid target {target!r}: expected RANK!SERVICE")
        if not service:
            raise UsageError(f"invalid target {target!r}: no service after '!'")
        return int(prefix), service
    if target.isdigit():
        if rank is not None:
            raise UsageError(f"{target!r} is a rank and so is --rank: give one")
        return int(target), "broker"
    if target == "any":
        return rank, "broker"
    return rank, target


@click.command(context_settings=HELP)
@click.option("-r", "--rank", type=RANK, default=None, help="Ask this rank (default: local).")
@click.argument("name")
def getattr(rank, name):  # noqa: A001 - the command is called getattr
    """Print the value of broker attribute NAME; an attribute that is not set (jobid
    outside a job, parent-uri at the top) is an error, as in Flux."""
    from ..errors import NotFound
    with handle() as h:
        value = h.call("attr.get", {"name": name}, nodeid=rank)["value"]
    if value == "":
        raise NotFound(f"{name}: No such file or directory (the attribute is not set "
                       "in this instance)")
    click.echo(value)


@click.command(context_settings=dict(HELP, ignore_unknown_options=True))
@click.option("-r", "--rank", type=RANK, default=None, help="Set on this rank (default: local).")
@click.option("-f", "--force", is_flag=True,
              help="Accepted (an attribute that cannot change at run time is still "
                   "refused here).")
@click.argument("name")
@click.argument("value")
def setattr(rank, force, name, value):  # noqa: A001
    """Set broker attribute NAME to VALUE (only attributes that may change at run time).

    A VALUE that starts with '-' (e.g. -1) is a value, not an option.
    """
    del force
    if name.startswith("-"):  # only VALUE may start with '-': NAME is a mistyped option
        raise click.NoSuchOption(name)
    with handle() as h:
        h.call("attr.set", {"name": name, "value": value}, nodeid=rank)


@click.command(context_settings=HELP)
@click.option("-v", "--values", is_flag=True, help="Show values too.")
@click.option("-r", "--rank", type=RANK, default=None, help="Ask this rank (default: local).")
def lsattr(values, rank):
    """List broker attributes."""
    from ..errors import NotFound
    with handle() as h:
        names = h.call("attr.list", nodeid=rank)["names"]
        if not values:
            click.echo("\n".join(names))
            return
        shown = {}
        for name in names:     # as Flux's: one attr.get each, '-' for an unset one
            try:
                shown[name] = h.call("attr.get", {"name": name}, nodeid=rank)["value"]
            except NotFound:
                shown[name] = "-"
    width = max(map(len, names))
    for name in names:
        click.echo(f"{name:<{width}}  {shown[name]}")


@click.command(context_settings=HELP)
@click.option("-r", "--rank", type=RANK, default=None, help="Ask this rank (default: local).")
@click.option("-C", "--clear", "clear_only", is_flag=True, help="Clear the ring, printing nothing.")
@click.option("-c", "--read-clear", "clear", is_flag=True,
              help="Clear the ring after printing it.")
@click.option("-f", "--follow", is_flag=True,
              help="After the ring, print new entries as they arrive, until Ctrl-C.")
@click.option("-n", "--new", is_flag=True, help="Follow only new entries (implies -f).")
@click.option("-H", "--human", is_flag=True,
              help="Human-readable times: [MonDD HH:MM] then offsets from it.")
@click.option("-d", "--delta", is_flag=True,
              help="With -H, the time since the previous entry instead.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per entry.")
@click.option("-L", "--color", is_flag=False, flag_value="auto", default=None,
              type=click.Choice(["always", "never", "auto"]), metavar="[WHEN]",
              help="always, never or auto (accepted: not colored here).")
def dmesg(rank, clear_only, clear, follow, new, human, delta, as_json, color):
    """Print the broker's recent log entries (its ring buffer)."""
    from ..errors import UsageError
    if as_json and human:
        raise UsageError("--json and --human do not go together")
    if delta and not human:
        raise UsageError("--delta needs --human")
    del color
    if (clear or clear_only) and (follow or new):
        raise UsageError("--clear does not go with --follow")
    if clear_only:   # as Flux's -C: the ring is emptied, nothing printed
        with handle() as h:
            h.call("broker.dmesg", {"clear": True}, nodeid=rank)
        return
    show = _entry_printer(as_json, human, delta)
    with handle() as h:
        if not (follow or new):
            for e in h.call("broker.dmesg", {"clear": clear}, nodeid=rank)["entries"]:
                show(e)
            return
        try:
            for resp in h.stream("broker.dmesg-follow", {"new": new}, nodeid=rank):
                for e in resp["entries"]:
                    show(e)
        except KeyboardInterrupt:
            return 0  # stopped as asked


def _entry_printer(as_json: bool, human: bool, delta: bool):
    from ..util.log import format_entry
    if as_json:
        return lambda e: click.echo(json.dumps(e))
    if not human:
        return lambda e: click.echo(format_entry(e))
    last = {"abs": None, "prev": None}

    def show(e):
        t = e.get("t", 0.0)
        minute = int(t // 60)
        if last["abs"] is None or minute != int(last["abs"] // 60):
            stamp = time.strftime("[%b%d %H:%M]", time.localtime(t))
            last["abs"] = t
        else:
            since = t - (last["prev"] if delta else last["abs"])
            stamp = f"[{since:+11.6f}]"
        last["prev"] = t
        click.echo(f"{stamp} {format_entry(e, with_time=False)}")
    return show


@click.command(context_settings=HELP)
@click.option("--reason", default="", help="Why (logged by the broker).")
@click.argument("target", required=False)
def shutdown(reason, target):
    """Shut the instance down: running jobs are cancelled, brokers leave leaves-first.

    TARGET (default: this instance) is a job id, to shut down the instance
    that job runs, or a URI, as for `fluxlite uri`.  Returns once the shutdown
    has begun."""
    from ..errors import HostUnreachable
    from .proxy import resolve
    uri = resolve(target) if target else None
    with handle(uri) as h:
        try:
            h.call("broker.shutdown", {"reason": reason or "fluxlite shutdown"}, nodeid=0)
        except HostUnreachable:
            # the broker may be gone before its answer reaches us: that is what we asked
            pass


@click.command(context_settings=HELP)
def uptime():
    """One line about the instance: time, state, how long it has run, owner, depth, size."""
    import pwd

    from ..util import fsd
    with handle() as h:
        st = h.call("broker.state", nodeid=0)
        level = h.getattr("instance-level")
        size = h.getattr("size")
    try:
        owner = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        owner = str(os.getuid())
    click.echo(f" {time.strftime('%H:%M:%S')} {st['state']} {fsd.format(st['uptime'])},  "
               f"owner {owner},  depth {level},  size {size}")
