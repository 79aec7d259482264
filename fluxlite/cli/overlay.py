"""`fluxlite overlay status`: the tree of brokers with each rank's state, drawn as Flux does."""

from __future__ import annotations

import json
import time

import click

from ..util import fsd
from .common import HELP, handle


@click.group(context_settings=HELP)
def overlay():
    """Show the tree of brokers."""


@overlay.command(context_settings=HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the raw status as JSON.")
@click.option("-v", "--verbose", is_flag=True,
              help="Show how long each rank has been in its state.")
@click.option("--no-pretty", is_flag=True, help="One line per rank, no tree drawing.")
def status(as_json, verbose, no_pretty):
    """Show every rank's state: full, partial, degraded, lost or offline."""
    with handle() as h:
        st = h.call("overlay.status", nodeid=0)
    if as_json:
        click.echo(json.dumps(st))
        return
    by_rank = {r["rank"]: r for r in st["ranks"]}
    children: dict[int, list[int]] = {}
    for r in st["ranks"]:
        if r["parent"] is not None:
            children.setdefault(r["parent"], []).append(r["rank"])
    now = st.get("now", time.time())

    def label(r: int) -> str:
        info = by_rank[r]
        text = f"{r} {info['hostname']}: {info['status']}"
        if info["state"] == "torpid":
            text += " (torpid)"
        if verbose:
            text += f" for {fsd.format(max(0.0, now - info['since']))}"
        return text

    if no_pretty:
        for r in sorted(by_rank):
            click.echo(label(r))
        return

    def walk(r: int, prefix: str, last: bool, root: bool) -> None:
        if root:
            click.echo(label(r))
            child_prefix = ""
        else:
            click.echo(f"{prefix}{'└─ ' if last else '├─ '}{label(r)}")
            child_prefix = prefix + ("   " if last else "│  ")
        kids = sorted(children.get(r, ()))
        for i, c in enumerate(kids):
            walk(c, child_prefix, i == len(kids) - 1, False)

    walk(0, "", True, True)
