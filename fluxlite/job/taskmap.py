"""Task maps: which node (job shell) runs which task, as RFC 34 writes it.

A taskmap is {"version": 1, "map": [[nodeid, nnodes, ppn, repeat], ...]}: each
entry gives `ppn` consecutive tasks to each of `nnodes` nodes from `nodeid`, the
whole entry `repeat` times.  The job's `--taskmap` shell option picks the scheme
(flux-submit(1)): `block` (the default: each node's tasks consecutive), `cyclic`
or `cyclic:N` (tasks dealt to the nodes in turn, N at a time), `manual:MAP`
(an RFC 34 map given whole) and `hostfile:FILE` (task N on the host of line N,
the list read again from the top until every task has one; a host names the
first of the job's nodes on it).  `block`, `cyclic` and `manual` keep the tasks
per node that the layout chose (`rset.layout`); `hostfile` may move tasks
between nodes, as Flux's does.  The block map is
arithmetic over nodes; the others cost what the job's task count costs, as the
shells start that many tasks anyway.

The PMI-1 `PMI_process_mapping` and the PMIx map of ranks per node are both
spelled from the one taskmap, so MPI sees the placement the shells made.
"""

from __future__ import annotations

import json

SCHEMES = ("block", "cyclic", "manual")


def block(counts: list[int]) -> dict:
    """The block taskmap of `counts` tasks per node."""
    entries: list[list[int]] = []
    for node, ppn in enumerate(counts):
        if entries and entries[-1][2] == ppn and entries[-1][0] + entries[-1][1] == node:
            entries[-1][1] += 1
        else:
            entries.append([node, 1, ppn, 1])
    return {"version": 1, "map": entries}


def nodes(tm: dict) -> list[int]:
    """Each task's node id, in task order."""
    out: list[int] = []
    for start, nnodes, ppn, repeat in tm["map"]:
        for _ in range(repeat):
            for node in range(start, start + nnodes):
                out += [node] * ppn
    return out


def from_nodes(owner: list[int]) -> dict:
    """The RFC 34 taskmap of tasks whose nodes are `owner` (in task order), with runs
    of nodes and repeated entries folded."""
    runs: list[list[int]] = []              # [node, ntasks]
    for n in owner:
        if runs and runs[-1][0] == n:
            runs[-1][1] += 1
        else:
            runs.append([n, 1])
    entries: list[list[int]] = []
    for node, ppn in runs:
        if entries and entries[-1][2] == ppn and entries[-1][3] == 1 \
                and entries[-1][0] + entries[-1][1] == node:
            entries[-1][1] += 1
        else:
            entries.append([node, 1, ppn, 1])
    folded: list[list[int]] = []
    for e in entries:
        if folded and folded[-1][:3] == e[:3]:
            folded[-1][3] += 1
        else:
            folded.append(list(e))
    return {"version": 1, "map": folded}


def build(counts: list[int], option: dict | None, hosts: list[str] | None = None) -> dict:
    """The taskmap of a job with `counts` tasks per node (on `hosts`, one name a node)
    and the `taskmap` shell option {"scheme", "value"} (and "hosts" for hostfile, the
    file's names, read at submit); ValueError when the scheme is unknown or a map
    does not fit the job."""
    scheme = (option or {}).get("scheme") or "block"
    value = (option or {}).get("value") or ""
    if scheme == "block":
        return block(counts)
    if scheme == "cyclic":
        step = parse_cyclic(value)
        left, owner = list(counts), []
        while any(left):
            for node, n in enumerate(left):
                take = min(step, n)
                owner += [node] * take
                left[node] -= take
        return from_nodes(owner)
    if scheme == "manual":
        tm = parse_manual(value)
        per_node = [0] * len(counts)
        for node in nodes(tm):
            if node >= len(counts):
                raise ValueError(f"taskmap manual: node {node} is not one of the job's "
                                 f"{len(counts)} node(s)")
            per_node[node] += 1
        if per_node != list(counts):
            raise ValueError(f"taskmap manual: the map gives {per_node} tasks per node; "
                             f"the job runs {list(counts)}")
        return tm
    if scheme == "hostfile":
        listed = (option or {}).get("hosts")
        if not isinstance(listed, list) or not listed or hosts is None:
            raise ValueError(f"taskmap hostfile:{value}: no host names were read from the "
                             "file at submit")
        first = {}
        for node, host in enumerate(hosts):
            first.setdefault(host, node)
        owner = []
        for i in range(sum(counts)):
            host = listed[i % len(listed)]
            if host not in first:
                raise ValueError(f"taskmap hostfile:{value}: host {host} is not one of the "
                                 "job's nodes")
            owner.append(first[host])
        return from_nodes(owner)
    raise ValueError(f"taskmap scheme {scheme!r} is not supported (block, cyclic, "
                     "cyclic:N, manual:TASKMAP or hostfile:FILE)")


def parse_cyclic(value: str) -> int:
    """N of `cyclic:N` (1 when empty); ValueError unless a positive integer."""
    if not value:
        return 1
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"taskmap cyclic: {value!r} is not a positive integer")
    return int(value)


def parse_manual(value: str) -> dict:
    """The RFC 34 map of `manual:MAP` (JSON, the map object or its list); ValueError."""
    try:
        tm = json.loads(value)
    except ValueError:
        raise ValueError(f"taskmap manual: {value!r} is not RFC 34 JSON") from None
    if isinstance(tm, list):
        tm = {"version": 1, "map": tm}
    entries = tm.get("map") if isinstance(tm, dict) else None
    if not isinstance(entries, list) or not entries or not all(
            isinstance(e, list) and len(e) == 4 and all(type(x) is int for x in e)
            and e[0] >= 0 and min(e[1:]) >= 1 for e in entries):
        raise ValueError(f"taskmap manual: {value!r} is not an RFC 34 map "
                         "([[nodeid, nnodes, ppn, repeat], ...])")
    return {"version": 1, "map": entries}


def check_option(scheme: str, value: str) -> None:
    """What can be checked of `--taskmap SCHEME:VALUE` before the job has nodes."""
    if scheme == "cyclic":
        parse_cyclic(value)
    elif scheme == "manual":
        parse_manual(value)
    elif scheme == "hostfile":
        if not value:
            raise ValueError("taskmap hostfile: give the file (hostfile:FILE)")
    elif scheme != "block":
        raise ValueError(f"taskmap scheme {scheme!r} is not supported (block, cyclic, "
                         "cyclic:N, manual:TASKMAP or hostfile:FILE)")


def counts_of(tm: dict, nnodes: int) -> list[int]:
    """Tasks per node of a taskmap over `nnodes` nodes."""
    out = [0] * nnodes
    for node in nodes(tm):
        out[node] += 1
    return out


def read_hostfile(path: str) -> list[str]:
    """The host names of a hostfile: each non-empty line a hostlist ("node[0-1]"), in
    order; ValueError naming what is wrong."""
    from ..util import hostlist
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(1 << 20)
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"taskmap hostfile:{path}: {getattr(exc, 'strerror', None) or exc}"
                         ) from None
    names: list[str] = []
    for line in text.splitlines():
        if line.strip():
            names += hostlist.decode(line.strip())
    if not names:
        raise ValueError(f"taskmap hostfile:{path}: the file names no host")
    return names


def is_block(tm: dict) -> bool:
    """True if every node's tasks are consecutive and in node order."""
    entries = tm["map"]
    return all(e[3] == 1 for e in entries) and all(
        a[0] + a[1] == b[0] for a, b in zip(entries, entries[1:])) and entries[0][0] == 0


def ranks_of(tm: dict, node: int) -> list[int]:
    """The global ranks of the tasks on `node`, in order."""
    return [rank for rank, n in enumerate(nodes(tm)) if n == node]


def pmi_mapping(tm: dict) -> str:
    """MPICH's PMI_process_mapping: (vector,(nodeid,nnodes,ppn),...), an entry written
    out `repeat` times (MPICH reads the triples in order)."""
    triples = [f"({s},{n},{p})" for s, n, p, r in tm["map"] for _ in range(r)]
    return "(vector," + ",".join(triples) + ")"


def pmix_map(tm: dict, nnodes: int) -> str:
    """PMIx_generate_ppn's input: each node's ranks, comma separated, nodes by ';'."""
    per_node: list[list[str]] = [[] for _ in range(nnodes)]
    for rank, node in enumerate(nodes(tm)):
        per_node[node].append(str(rank))
    return ";".join(",".join(r) for r in per_node)
