"""Small instance commands: ping, getattr, setattr, lsattr, dmesg, shutdown."""

from __future__ import annotations

import json
import os
import time

import click

from .common import HELP, RANK, handle


@click.command(context_settings=HELP)
@click.option("-c", "--count", type=click.IntRange(1, None), default=1, show_default=True,
              help="Number of pings to send.")
@click.option("-i", "--interval", type=click.FloatRange(0, 3600), default=0.0,
              help="Seconds between pings.")
@click.option("-r", "--rank", type=RANK, default=None, help="Rank to ping a SERVICE on.")
@click.option("-p", "--pad", type=click.IntRange(0, 1 << 20), default=0,
              help="Bytes of padding in each ping.")
@click.argument("target")
def ping(count, interval, rank, pad, target):
    """Ping TARGET: a rank number (its broker service) or a service name."""
    if target.isdigit():
        nodeid, topic = int(target), "broker.ping"
    else:
        nodeid, topic = rank, f"{target}.ping"
    payload = {"pad": "x" * pad, "seq": 0}
    with handle() as h:
        for seq in range(count):
            payload["seq"] = seq
            t0 = time.perf_counter()
            resp = h.call(topic, payload, nodeid=nodeid)
            ms = (time.perf_counter() - t0) * 1000
            hops = len(resp.get("route", [])) if isinstance(resp, dict) else 0
            where = resp.get("rank", nodeid) if isinstance(resp, dict) else nodeid
            click.echo(f"{where}!{topic} pad={pad} seq={seq} time={ms:.3f} ms (hops={hops})")
            if interval and seq + 1 < count:
                time.sleep(interval)


@click.command(context_settings=HELP)
@click.option("-r", "--rank", type=RANK, default=None, help="Ask this rank (default: local).")
@click.argument("name")
def getattr(rank, name):  # noqa: A001 - the command is called getattr
    """Print the value of broker attribute NAME."""
    with handle() as h:
        click.echo(h.call("broker.getattr", {"name": name}, nodeid=rank)["value"])


@click.command(context_settings=dict(HELP, ignore_unknown_options=True))
@click.option("-r", "--rank", type=RANK, default=None, help="Set on this rank (default: local).")
@click.argument("name")
@click.argument("value")
def setattr(rank, name, value):  # noqa: A001
    """Set broker attribute NAME to VALUE (only attributes that may change at run time).

    A VALUE that starts with '-' (e.g. -1) is a value, not an option.
    """
    with handle() as h:
        h.call("broker.setattr", {"name": name, "value": value}, nodeid=rank)


@click.command(context_settings=HELP)
@click.option("-v", "--values", is_flag=True, help="Show values too.")
@click.option("-r", "--rank", type=RANK, default=None, help="Ask this rank (default: local).")
def lsattr(values, rank):
    """List broker attributes."""
    with handle() as h:
        attrs = h.call("broker.lsattr", nodeid=rank)["attrs"]
    width = max(len(a["name"]) for a in attrs)
    for a in attrs:
        if values:
            v = "-" if a["value"] is None else a["value"]
            click.echo(f"{a['name']:<{width}}  {v}")
        else:
            click.echo(a["name"])


@click.command(context_settings=HELP)
@click.option("-r", "--rank", type=RANK, default=None, help="Ask this rank (default: local).")
@click.option("-C", "--clear", is_flag=True, help="Clear the ring after printing it.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per entry.")
def dmesg(rank, clear, as_json):
    """Print the broker's recent log entries."""
    from ..util.log import format_entry
    with handle() as h:
        entries = h.call("broker.dmesg", {"clear": clear}, nodeid=rank)["entries"]
    for e in entries:
        click.echo(json.dumps(e) if as_json else format_entry(e))


@click.command(context_settings=HELP)
@click.option("--reason", default="", help="Why (logged by the broker).")
def shutdown(reason):
    """Shut the instance down: running jobs are cancelled, brokers leave leaves-first."""
    import errno

    from ..errors import FluxliteError
    with handle() as h:
        try:
            h.call("broker.shutdown", {"reason": reason or "fluxlite shutdown"}, nodeid=0)
        except FluxliteError as exc:
            # the broker may be gone before its answer reaches us: that is what we asked
            if exc.errnum != errno.EHOSTUNREACH:
                raise


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
