"""`fluxlite pstree`: jobs and the jobs of nested instances as a tree (flux-pstree(1)).

The root is the enclosing instance ('.'); each running instance (batch/alloc)
is entered through its URI (its job memo) and its jobs drawn below it.
Identical leaves combine as N*[label]; with -a, labels add ':STATUS'.  The
tree is built once (build_tree) and drawn by draw_tree, which `top` reuses.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field

import click

from ..errors import FluxliteError
from .common import HELP, handle

DETAILS = {
    "default": "{id.f58:>12} {username:<8.8} {status_abbrev:>2.2} {ntasks:>6h} {nnodes:>6h} "
               "{runtime!F:>8h}",
    "resources": "{id.f58:>12} {nnodes:>6h} {ncores:>6h} {ranks:>8.8}",
}
CONNECTORS = {"default": ("├── ", "└── ", "│   ", "    "),
              "compact": ("├─", "└─", "│ ", "  "),
              "ascii": ("|-- ", "`-- ", "|   ", "    ")}


@dataclass
class Node:
    job: dict | None                 # None for the root instance
    values: dict = field(default_factory=dict)
    children: list[Node] = field(default_factory=list)
    uri: str = ""                    # a running instance's


def build_tree(uri: str | None, *, which: str, words, count: int, levels: int | None,
               userid, depth: int = 0) -> list[Node]:
    """The jobs of the instance at `uri` (None: this one), newest first, each running
    instance with its own jobs below it, `levels` deep."""
    from ..jobapi import api
    from .jobs import flux_order, job_values
    from .jobselect import matches
    with handle(uri) as h:
        jobs = api.list_jobs(h, which, userid=userid)
        hosts = api.hosts(h) if jobs else []
    jobs = [j for j in flux_order(jobs) if matches(j, words)][:count]
    now = time.time()
    nodes = []
    for j in jobs:
        node = Node(j, job_values(j, hosts, now))
        inner = (j.get("memo") or {}).get("uri", "")
        if inner and j.get("state") == "RUN" and (levels is None or depth < levels):
            node.uri = inner
            try:
                node.children = build_tree(inner, which=which, words=words, count=count,
                                           levels=levels, userid=userid, depth=depth + 1)
            except FluxliteError:
                node.children = []    # it ended meanwhile, or is not up yet
        nodes.append(node)
    return nodes


def draw_tree(nodes: list[Node], label, *, style: str = "default", combine: bool = True,
              prefix: str = "") -> list[tuple[Node, str]]:
    """(node, tree text) per line: connectors, then the label (N*[label] combined)."""
    tee, elbow, pipe, blank = CONNECTORS[style]
    rows: list[tuple[list[Node], str]] = []
    for n in nodes:
        text = label(n)
        if (combine and not n.children and rows and not rows[-1][0][0].children
                and rows[-1][1] == text):
            rows[-1][0].append(n)
        else:
            rows.append(([n], text))
    out = []
    for i, (group, text) in enumerate(rows):
        last = i == len(rows) - 1
        shown = f"{len(group)}*[{text}]" if len(group) > 1 else text
        out.append((group[0], prefix + (elbow if last else tee) + shown))
        out += draw_tree(group[0].children, label, style=style, combine=combine,
                         prefix=prefix + (blank if last else pipe))
    return out


@click.command(context_settings=HELP)
@click.option("-a", "--all", "all_", is_flag=True, help="Jobs in every state (labels add :ST).")
@click.option("-c", "--count", type=click.IntRange(1), default=1000, show_default=True,
              help="At most N jobs at every level.")
@click.option("-f", "--filter", "filters", default=None, metavar="STATE|RESULT,...",
              help="Jobs in these states or with these results (default: running).")
@click.option("-l", "--long", "long_", is_flag=True, help="Do not cut lines at the terminal width.")
@click.option("-p", "--parent-ids", is_flag=True, help="Put the job id before parents' labels.")
@click.option("-L", "--level", type=click.IntRange(0), default=None, metavar="N",
              help="Descend only N levels of nested instances.")
@click.option("-x", "--extended", is_flag=True, help="Details before the tree (-d default).")
@click.option("-d", "--details", "--detail", "details", type=click.Choice(sorted(DETAILS)),
              default=None,
              help="A named details format before the tree.")
@click.option("-n", "--no-header", is_flag=True, help="No header line for the details.")
@click.option("-X", "--no-combine", is_flag=True, help="Do not combine identical leaves.")
@click.option("-o", "--label", default=None, metavar="FORMAT",
              help="Label format, fields as `fluxlite jobs -o` (default {name}).")
@click.option("--parent-label", default=None, metavar="FORMAT",
              help="Label format for parents (instances).")
@click.option("--detail-format", default=None, metavar="FORMAT",
              help="An explicit details format (implies -x).")
@click.option("--skip-root", type=click.Choice(["yes", "no"]), default=None,
              help="Leave out (yes) or show (no) the enclosing instance '.'.")
@click.option("-C", "--compact", is_flag=True, help="Compact connectors.")
@click.option("--ascii", "ascii_", is_flag=True, help="ASCII connectors.")
@click.argument("jobids", nargs=-1)
def pstree(all_, count, filters, long_, parent_ids, level, extended, details, no_header,
           no_combine, label, parent_label, detail_format, skip_root, compact, ascii_,
           jobids):
    """Draw running jobs by name as a tree, nested instances' jobs below them, as
    flux pstree.  With JOBIDS, only those jobs (and what runs in them)."""
    from .common import parse_jobid
    from .jobs import FORMATS, HEADINGS
    from .jobselect import filter_option
    from .outformat import OutputFormat
    words = filter_option(None, None, filters) if filters else (
        ["pending", "running", "inactive"] if all_ else ["running"])
    which = "all" if set(words) - {"pending", "running", "active"} else "active"
    child_fmt = label or ("{name}:{status_abbrev}" if all_ or filters else "{name}")
    parent_fmt = parent_label or (label if label else child_fmt)
    if parent_ids:
        parent_fmt = "{id.f58} " + parent_fmt
    if extended and details is None:
        details = "default"
    prefix_fmt = detail_format or (DETAILS[details] if details else None)
    child_out = OutputFormat(child_fmt, HEADINGS, FORMATS)
    parent_out = OutputFormat(parent_fmt, HEADINGS, FORMATS)
    prefix_out = OutputFormat(prefix_fmt, HEADINGS, FORMATS) if prefix_fmt else None
    ids = {parse_jobid(j) for j in jobids}
    nodes = build_tree(None, which=which, words=words, count=count, levels=level,
                       userid=os.getuid())
    if ids:
        nodes = [n for n in nodes if n.job["id"] in ids]
    skip = skip_root == "yes" if skip_root else bool(prefix_out or ids)
    style = "ascii" if ascii_ else "compact" if compact else "default"

    def text(n: Node) -> str:
        return (parent_out if n.uri else child_out).format(n.values)

    lines: list[tuple[Node | None, str]] = []
    if skip:
        for n in nodes:   # each top job is a root of its own
            lines.append((n, text(n)))
            lines += draw_tree(n.children, text, style=style, combine=not no_combine)
    else:
        lines.append((None, "."))
        lines += draw_tree(nodes, text, style=style, combine=not no_combine)
    width = None if long_ else _columns()
    if prefix_out is not None and not no_header:
        click.echo(_cut(prefix_out.header(), width))
    for node, tree in lines:
        head = ""
        if prefix_out is not None:
            head = (prefix_out.format(node.values) if node is not None
                    else " " * len(prefix_out.header())) + " "
        click.echo(_cut(head + tree, width))


def _columns() -> int | None:
    cols = os.environ.get("COLUMNS")
    if cols and cols.isdigit():
        return int(cols)
    if not os.isatty(1):
        return None
    return shutil.get_terminal_size().columns


def _cut(line: str, width: int | None) -> str:
    return line if width is None or len(line) <= width else line[: width - 1] + "+"
