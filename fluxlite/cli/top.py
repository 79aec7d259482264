"""`fluxlite top`: a live view of an instance (flux-top(1)), drawn with rich.

The screen shows the instance (its job id when nested, size, depth,
uptime), its nodes up, cores (and GPUs, when R has them) busy and free as
bars, the job counts, and the jobs: running first, with their elapsed time,
then pending, then the latest inactive.  Rows that are instances
(batch/alloc) are marked '▸': Enter goes into one, 'q' or Escape comes back
out (and at the top, quits); arrows or j/k move the selection.  rich's Live
redraws the alternate screen in place each period, so nothing flickers.

The model (fetch) is separate from the drawing (render), and the terminal
loop (Screen) only reads keys and calls both.
"""

from __future__ import annotations

import os
import select
import sys
import time
from dataclasses import dataclass, field

import click

from ..errors import FluxliteError, UsageError
from .common import HELP, handle

MAX_INACTIVE = 20   # latest inactive jobs shown below the active ones


@dataclass
class View:
    """What one refresh shows about one instance."""

    title: str
    size: int = 0
    depth: str = "0"
    uptime: float = 0.0
    nodes_up: int = 0
    cores_total: int = 0
    cores_busy: int = 0
    gpus_total: int = 0
    gpus_busy: int = 0
    stats: dict = field(default_factory=dict)
    rows: list[dict] = field(default_factory=list)   # job_values + "uri"


def fetch(uri: str | None, title: str, queue: str | None = None) -> View:
    from ..job import states
    from ..jobapi import api
    from ..util import idset
    from .jobs import flux_order, job_values
    with handle(uri) as h:
        v = View(title)
        v.size = int(h.getattr("size"))
        v.depth = h.getattr("instance-level")
        v.uptime = h.call("broker.state", nodeid=0)["uptime"]
        sched = api.sched_view(h)
        status = h.call("resource.status", nodeid=0)["ranks"]
        jobs = api.list_jobs(h, "all", userid=None)
        if queue is not None:   # -q: that queue's jobs only
            jobs = [j for j in jobs if (j.get("queue") or "") == queue]
        v.stats = api.stats(h)
        hosts = api.hosts(h) if jobs else []
    v.cores_total = sum(len(c) for r, c in sched["all"].items() if r not in sched["down"])
    v.cores_busy = sum(len(c) for c in sched["allocated"].values())
    v.nodes_up = sum(1 for info in status.values() if info.get("online") and not info["lost"])
    for info in status.values():   # GPUs: present once the inventory has them
        gpus = info.get("gpus") or ""
        v.gpus_total += len(idset.decode(gpus)) if isinstance(gpus, str) else len(gpus)
    now = time.time()
    active = [j for j in jobs if j["state"] != states.INACTIVE]
    running = [j for j in active if j["state"] in states.RUNNING]
    pending = [j for j in active if j["state"] not in states.RUNNING]
    done = sorted((j for j in jobs if j["state"] == states.INACTIVE),
                  key=lambda j: -(j.get("t_inactive") or 0))[:MAX_INACTIVE]
    for j in running:
        v.gpus_busy += int(j.get("ngpus") or 0)
    for j in flux_order(running) + flux_order(pending) + done:
        row = job_values(j, hosts, now)
        row["uri"] = (j.get("memo") or {}).get("uri", "") if j["state"] == "RUN" else ""
        v.rows.append(row)
    return v


def render(v: View, selected: int, width: int, height: int):
    """The whole screen for one View, as a rich renderable."""
    from rich.console import Group
    from rich.progress_bar import ProgressBar
    from rich.table import Table
    from rich.text import Text

    from ..util import fsd
    head = Table.grid(padding=(0, 2))
    head.add_column()
    head.add_column()
    head.add_column()
    head.add_row(Text(v.title, style="bold"),
                 Text(f"size {v.size}  depth {v.depth}  uptime {fsd.format(v.uptime)}"),
                 Text(f"nodes {v.nodes_up}/{v.size} up"))
    bar_width = max(10, min(40, width - 40))

    def meter(name, busy, total):
        return (Text(f"{name:<5}"), ProgressBar(total=max(total, 1), completed=busy,
                                                width=bar_width),
                Text(f"{busy}/{total} busy, {total - busy} free"))

    bars = Table.grid(padding=(0, 1))
    for _ in range(3):
        bars.add_column()
    bars.add_row(*meter("cores", v.cores_busy, v.cores_total))
    if v.gpus_total:
        bars.add_row(*meter("gpus", v.gpus_busy, v.gpus_total))
    s = v.stats
    counts = Text(f"jobs  {s.get('pending', 0)} pending  {s.get('running', 0)} running  "
                  f"{s.get('successful', 0)} complete  {s.get('failed', 0)} failed  "
                  f"{s.get('canceled', 0)} canceled  {s.get('timeout', 0)} timeout")
    table = Table(box=None, pad_edge=False, expand=True, header_style="bold reverse")
    for name, justify in (("", "left"), ("JOBID", "right"), ("USER", "left"),
                          ("ST", "right"), ("NTASKS", "right"), ("NNODES", "right"),
                          ("RUNTIME", "right"), ("NAME", "left")):
        table.add_column(name, justify=justify, no_wrap=True)
    room = max(1, height - 7)
    first = max(0, selected - room + 1)
    for i, r in enumerate(v.rows[first:first + room], start=first):
        style = "reverse" if i == selected else (
            "green" if r["state"] in ("RUN", "CLEANUP") else
            "yellow" if r["status_abbrev"] in ("PD", "S", "D", "P") else "dim")
        table.add_row("▸" if r["uri"] else " ", r["id.f58"], r["username"],
                      r["status_abbrev"], str(r["ntasks"]), str(r["nnodes"]),
                      fsd.format(r["contextual_time"]) if r["contextual_time"] else "-",
                      r["name"], style=style)
    keys = Text("q: quit/leave  ↑↓ j k: select  Enter: enter instance ▸", style="dim")
    return Group(head, bars, counts, Text(""), table, keys)


class Screen:
    """The terminal loop: keys in, a redraw per period or key."""

    def __init__(self, uri: str | None, title: str, delay: float, queue: str | None = None):
        self.stack = [(uri, title, 0)]   # (uri, title, selected row) per level
        self.delay = delay
        self.queue = queue

    def run(self) -> int:
        import termios
        import tty

        from rich.console import Console
        from rich.live import Live
        console = Console()
        fd = sys.stdin.fileno()
        saved = termios.tcgetattr(fd)
        tty.setcbreak(fd)
        try:
            with Live(console=console, screen=True, auto_refresh=False) as live:
                view = None
                next_fetch = 0.0
                while self.stack:
                    uri, title, sel = self.stack[-1]
                    if time.monotonic() >= next_fetch:
                        try:
                            view = fetch(uri, title, self.queue if len(self.stack) == 1
                                         else None)
                        except FluxliteError:
                            if len(self.stack) == 1:
                                raise
                            self.stack.pop()   # the nested instance ended: back out
                            continue
                        next_fetch = time.monotonic() + self.delay
                    sel = min(sel, max(0, len(view.rows) - 1))
                    self.stack[-1] = (uri, title, sel)
                    size = console.size
                    live.update(render(view, sel, size.width, size.height), refresh=True)
                    key = _read_key(fd, max(0.0, next_fetch - time.monotonic()))
                    if key is None:
                        continue
                    self._key(key, view, sel)
                    if key in ("enter", "q", "esc"):
                        next_fetch = 0.0
        finally:
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        return 0

    def _key(self, key: str, view: View, sel: int) -> None:
        uri, title, _ = self.stack[-1]
        if key in ("q", "esc"):
            self.stack.pop()
        elif key in ("down", "j"):
            self.stack[-1] = (uri, title, min(sel + 1, max(0, len(view.rows) - 1)))
        elif key in ("up", "k"):
            self.stack[-1] = (uri, title, max(0, sel - 1))
        elif key == "enter" and view.rows and view.rows[sel]["uri"]:
            row = view.rows[sel]
            self.stack.append((row["uri"], f"{title} / {row['id.f58']} {row['name']}", 0))


def _read_key(fd: int, timeout: float) -> str | None:
    ready, _, _ = select.select([fd], [], [], timeout)
    if not ready:
        return None
    data = os.read(fd, 16)
    if data.startswith(b"\x1b["):
        return {b"A": "up", b"B": "down"}.get(data[2:3], "other")
    if data == b"\x1b":
        return "esc"
    if data in (b"\r", b"\n"):
        return "enter"
    return data[:1].decode(errors="replace")


@click.command(context_settings=HELP)
@click.option("-d", "--delay", type=click.FloatRange(0.1, 3600), default=2.0,
              show_default=True, help="Seconds between refreshes.")
@click.option("-q", "--queue", default=None, metavar="NAME",
              help="Only the jobs of queue NAME (in this instance).")
@click.option("--color", is_flag=False, flag_value="auto", default=None, metavar="[WHEN]",
              type=click.Choice(["always", "never", "auto"]),
              help="always, never or auto (the terminal's colors are used as it allows).")
@click.argument("target", required=False)
def top(delay, queue, color, target):
    """A live view of the instance: cores (and GPUs) busy and free, jobs running
    first with their elapsed time, nested instances to enter (Enter) and leave (q).

    TARGET is a job id (an instance run as a job) or a URI, as for `fluxlite
    proxy`; the default is this instance."""
    if not (os.isatty(0) and os.isatty(1)):
        raise UsageError("top needs a terminal on stdin and stdout (try `fluxlite jobs` "
                         "or `fluxlite pstree`)")
    uri, title = None, "."
    if target:
        from .proxy import resolve
        uri, title = resolve(target), target
    else:
        jobid = os.environ.get("FLUXLITE_URI") and _own_jobid()
        title = jobid or "."
    del color
    if queue is not None:
        _check_queue(uri, queue)
    return Screen(uri, title, delay, queue).run()


def _check_queue(uri: str | None, queue: str) -> None:
    """-q NAME of a queue the instance does not have is an error, as Flux's top says."""
    from ..jobapi import api
    with handle(uri) as h:
        status = api.queue_status(h, None)
    if queue not in (status.get("queues") or {}):
        raise UsageError(f"queue {queue} not configured")


def _own_jobid() -> str:
    try:
        with handle() as h:
            return h.getattr("jobid")
    except FluxliteError:
        return ""
