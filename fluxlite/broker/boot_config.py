"""The config-file bootstrap: Flux's `[bootstrap]` TOML table, parsed and checked.

A fixed set of hosts, each running one broker, find their places from one
shared file (flux-config-bootstrap(5)):

    [bootstrap]
    curve_cert = "/etc/fluxlite/curve.cert"
    default_port = 8050
    default_bind = "tcp://eth0:%p"
    default_connect = "tcp://%h:%p"
    hosts = [{host = "node0"}, {host = "node[1-3]", parent = "node0"}]

A broker's rank is the index of its host name in the expanded `hosts` array
(hostlists are expanded in order); the size is the array's length.  `%h` in
a URI is the entry's host, `%p` the default port, `%%` a literal percent.
Without `parent`, a rank's parent is rank 0 (Flux's rule); `parent` names
another host (or gives its rank) and the tree must lead every rank back to
rank 0.  A missing or empty `hosts` array is a one-broker instance.

`parse()` checks the whole table at once, so a typo is found on every host
alike, and raises UsageError whose sentence names the key that is wrong;
`BootConfig.place(hostname)` then says where one broker sits (its Placement),
and `run(config, place, ...)` runs that broker (`fluxlite broker --config-path
FILE`): its tree is the config's, its TCP links present the shared
certificate's keys and accept only peers that hold it (overlay/zap.py), rank 0
runs the initial program if one is given, else serves until `fluxlite
shutdown`.  Parsing reads no network and binds nothing.  Unlike Flux, a host
listed twice is an error rather than merged.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, replace

from ..errors import UsageError
from ..util import hostlist, idset, tree
from .attrs import read_toml
from .placement import Placement

TABLE_KEYS = ("curve_cert", "default_port", "default_bind", "default_connect",
              "enable_ipv6", "hosts")
HOST_KEYS = ("host", "bind", "connect", "parent")
IPC_PATH_MAX = 107  # sun_path, less its terminating NUL

_LABEL_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")


@dataclass(frozen=True)
class HostEntry:
    """One rank of the instance, as the config file places it."""
    rank: int
    host: str
    bind: str | None      # where this rank listens for its children
    connect: str | None   # where its children reach it
    parent: int | None    # None for rank 0


@dataclass(frozen=True)
class BootConfig:
    """A checked `[bootstrap]` table; `hosts` is empty for a one-broker instance."""
    hosts: tuple[HostEntry, ...]
    curve_cert: str | None
    enable_ipv6: bool

    @property
    def size(self) -> int:
        return max(1, len(self.hosts))

    @property
    def parents(self) -> tuple[int | None, ...]:
        return tuple(e.parent for e in self.hosts) or (None,)

    def children(self, rank: int) -> tuple[int, ...]:
        return tuple(e.rank for e in self.hosts if e.parent == rank)

    def rank_of(self, hostname: str) -> int:
        """The rank of the broker on `hostname`; UsageError if it is not listed."""
        if not self.hosts:
            return 0
        for e in self.hosts:
            if e.host == hostname:
                return e.rank
        names = hostlist.encode(e.host for e in self.hosts)
        raise UsageError(f"[bootstrap]: this host's name {hostname!r} is not in hosts "
                         f"({names}); set the host name or add it to hosts")

    def place(self, hostname: str) -> Placement:
        """Where the broker running on `hostname` sits in the tree (its CURVE keys are
        the certificate's, read by run())."""
        rank = self.rank_of(hostname)
        if not self.hosts:
            return Placement(rank=0, size=1, topology=tree.Topology([None]), hosts=(hostname,))
        me = self.hosts[rank]
        topology = tree.Topology(list(self.parents))
        return Placement(rank=rank, size=self.size, topology=topology,
                         hosts=tuple(e.host for e in self.hosts),
                         bind_endpoint=me.bind if topology.children(rank) else None,
                         parent_endpoint=self.hosts[me.parent].connect
                         if me.parent is not None else None)


def uses_tcp(place: Placement) -> bool:
    """Whether any link of this broker is TCP (its bind or its parent's URI)."""
    return any(u is not None and u.startswith("tcp://")
               for u in (place.bind_endpoint, place.parent_endpoint))


def run(config: BootConfig, place: Placement, attrs: dict[str, str], command: list[str], *,
        rundir: str | None = None, insecure: bool = False) -> int:
    """Run the broker `place` describes to completion; returns its exit code.

    `attrs` are the instance's attributes (the config file's other tables and
    -S); `command` is the initial program (rank 0 only; none: serve until
    `fluxlite shutdown`).  `rundir` is kept (clients reach the broker at
    local://RUNDIR/local); without it a private one is made and removed."""
    from ..overlay.overlay import Curve
    from ..util import curve
    from ..util.paths import check_private_dir, make_private_dirs, make_rundir
    from .placement import BrokerConfig
    if config.curve_cert is not None and place.size > 1:
        cert = curve.load_certificate(config.curve_cert)
        place = replace(place, curve=Curve(public=cert.public, secret=cert.secret))
    elif uses_tcp(place) and not insecure:
        raise UsageError("a TCP overlay needs curve_cert in [bootstrap] (make one with "
                         "`fluxlite keygen PATH`)")
    place = replace(place, insecure=insecure)
    crit = attrs.get("broker.critical-ranks", "")
    if crit == "":
        attrs["broker.critical-ranks"] = idset.encode(place.topology.critical_ranks())
    elif crit != "all" and max(idset.decode(crit), default=0) >= place.size:
        raise UsageError(f"invalid value for broker.critical-ranks={crit!r}: this instance "
                         f"has ranks 0-{place.size - 1}")
    owns_rundir = rundir is None
    if rundir is None:
        rundir = make_rundir(None)
    else:
        make_private_dirs(rundir)
        check_private_dir(rundir)
    if len(os.path.join(rundir, "local")) > 100:
        raise UsageError(f"run directory path is too long for a socket: {rundir}")
    cfg = BrokerConfig(place, attrs=attrs, rundir=rundir,
                       local_path=os.path.join(rundir, "local"),
                       initial_program=(command or None) if place.rank == 0 else None,
                       initial_pgid=os.getpgrp())
    from .main import run_broker
    try:
        return run_broker(cfg)
    finally:
        if owns_rundir:
            shutil.rmtree(rundir, ignore_errors=True)


def load(path: str, *, insecure: bool = False) -> BootConfig:
    """Read the `[bootstrap]` table of the TOML file at `path` (other tables are ignored)."""
    data = read_toml(path)
    if "bootstrap" not in data:
        raise UsageError(f"config {path} has no [bootstrap] table")
    try:
        return parse(data["bootstrap"], insecure=insecure)
    except UsageError as exc:
        raise UsageError(f"config {path}: {exc.message}") from None


def parse(table, *, insecure: bool = False) -> BootConfig:
    """Check a `[bootstrap]` table (a dict from TOML) and expand its hosts.

    `insecure` allows an instance of more than one broker without curve_cert
    (plain TCP, for tests); otherwise a missing certificate is an error."""
    d = _table_defaults(table)
    rows, rank_by_name = _expand_hosts(d.hosts)
    hosts = _place_rows(rows, rank_by_name, d)
    _check_inner_ranks_have_uris(hosts, rows)
    if len(rows) > 1 and d.curve_cert is None and not insecure:
        raise UsageError("[bootstrap]: curve_cert must be set for more than one host "
                         "(make one with `fluxlite keygen PATH`)")
    return BootConfig(hosts, d.curve_cert, d.enable_ipv6)


@dataclass(frozen=True)
class _Defaults:
    """The table's keys other than the hosts' own, checked."""
    curve_cert: str | None
    port: int | None
    bind: str | None
    connect: str | None
    enable_ipv6: bool
    hosts: list


def _table_defaults(table) -> _Defaults:
    if not isinstance(table, dict):
        raise UsageError("[bootstrap] must be a table")
    _no_unknown_keys(table, TABLE_KEYS, "[bootstrap]")
    curve_cert = _opt_str(table, "curve_cert")
    if curve_cert == "":
        raise UsageError("[bootstrap]: curve_cert must be a path, not empty")
    port = table.get("default_port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int)
                             or not 1 <= port <= 65535):
        raise UsageError(f"[bootstrap]: default_port must be an integer from 1 to 65535, "
                         f"not {port!r}")
    ipv6 = table.get("enable_ipv6", False)
    if not isinstance(ipv6, bool):
        raise UsageError(f"[bootstrap]: enable_ipv6 must be true or false, not {ipv6!r}")
    raw = table.get("hosts", [])
    if not isinstance(raw, list):
        raise UsageError("[bootstrap]: hosts must be an array of tables like "
                         "[{host = \"node[0-3]\"}]")
    return _Defaults(curve_cert, port, _opt_str(table, "default_bind"),
                     _opt_str(table, "default_connect"), ipv6, raw)


def _no_unknown_keys(table: dict, allowed: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r} "
                         f"(allowed: {', '.join(allowed)})")


def _expand_hosts(raw: list) -> tuple[list[tuple[int, str, dict]], dict[str, int]]:
    """Every host name in order, each with its rank: [(index in hosts, name, entry)]
    and name -> rank."""
    rows: list[tuple[int, str, dict]] = []
    rank_by_name: dict[str, int] = {}
    for i, entry in enumerate(raw):
        where = f"[bootstrap] hosts[{i}]"
        for name in _entry_names(entry, where):
            problem = _bad_hostname(name)
            if problem:
                raise UsageError(f"{where}: host {name!r} {problem}")
            if name in rank_by_name:
                first = rows[rank_by_name[name]][0]
                raise UsageError(f"{where}: host {name!r} is listed twice (already rank "
                                 f"{rank_by_name[name]}, from hosts[{first}])")
            rank_by_name[name] = len(rows)
            rows.append((i, name, entry))
    return rows, rank_by_name


def _entry_names(entry, where: str) -> list[str]:
    """The host names one entry of `hosts` expands to."""
    if not isinstance(entry, dict):
        raise UsageError(f"{where} must be a table like {{host = \"node0\"}}")
    _no_unknown_keys(entry, HOST_KEYS, where)
    if "host" not in entry:
        raise UsageError(f"{where}: the host key is missing")
    text = entry["host"]
    if not isinstance(text, str):
        raise UsageError(f"{where}: host must be a string (a hostlist), not {text!r}")
    try:
        names = hostlist.decode(text)
    except ValueError as exc:
        raise UsageError(f"{where}: host: {exc}") from None
    if not names:
        raise UsageError(f"{where}: host is empty")
    return names


def _place_rows(rows: list[tuple[int, str, dict]], rank_by_name: dict[str, int],
                d: _Defaults) -> tuple[HostEntry, ...]:
    """Each rank's URIs and parent; the parents must form a tree under rank 0."""
    out = []
    for rank, (i, name, entry) in enumerate(rows):
        where = f"[bootstrap] hosts[{i}] ({name})"
        bind = _entry_uri(entry, "bind", d.bind, name, d.port, where)
        connect = _entry_uri(entry, "connect", d.connect, name, d.port, where)
        parent = _parent(entry.get("parent"), rank, name, rank_by_name, len(rows), where)
        out.append(HostEntry(rank, name, bind, connect, parent))
    _check_tree([e.parent for e in out], rows)
    return tuple(out)


def _entry_uri(entry: dict, key: str, default: str | None, host: str, port: int | None,
               where: str) -> str | None:
    """An entry's bind or connect URI (its own, else the table's default)."""
    template = entry.get(key, default)
    if template is None:
        return None
    if not isinstance(template, str):
        raise UsageError(f"{where}: {key} must be a string URI, not {template!r}")
    origin = key if key in entry else f"default_{key}"
    return _uri(template, host, port, f"{where}: {origin}")


def _check_inner_ranks_have_uris(hosts: tuple[HostEntry, ...], rows) -> None:
    """A rank with children needs a URI to bind and one its children connect to."""
    for e in hosts:
        kids = [c.rank for c in hosts if c.parent == e.rank]
        if not kids:
            continue
        where = f"[bootstrap] hosts[{rows[e.rank][0]}] ({e.host})"
        for key, value in (("bind", e.bind), ("connect", e.connect)):
            if value is None:
                raise UsageError(f"{where} has children (ranks {idset.encode(kids)}) but no "
                                 f"{key} URI: set {key} there or default_{key}")


def format_uri(template: str, host: str, port: int | None) -> str:
    """Substitute %h (host), %p (port) and %% in a URI template.

    Raises ValueError for %p without a port or an unknown %-token."""
    out: list[str] = []
    i = 0
    while i < len(template):
        c = template[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        token = template[i + 1:i + 2]
        if token == "h":
            out.append(host)
        elif token == "p":
            if port is None:
                raise ValueError("%p is used but default_port is not set")
            out.append(str(port))
        elif token == "%":
            out.append("%")
        else:
            raise ValueError(f"unknown token %{token} (allowed: %h, %p, %%)")
        i += 2
    return "".join(out)


def check_uri(uri: str) -> None:
    """A ZeroMQ endpoint fit for the overlay: tcp://ADDRESS:PORT or ipc://PATH."""
    scheme, sep, rest = uri.partition("://")
    if not sep:
        raise ValueError(f"{uri!r} has no scheme (expected tcp://ADDRESS:PORT or ipc://PATH)")
    if scheme == "ipc":
        if not rest:
            raise ValueError(f"{uri!r}: the socket path is empty")
        if len(rest.encode()) > IPC_PATH_MAX:
            raise ValueError(f"{uri!r}: the socket path is longer than {IPC_PATH_MAX} bytes")
        return
    if scheme != "tcp":
        raise ValueError(f"{uri!r}: the scheme must be tcp or ipc")
    address, colon, port = rest.rpartition(":")
    if not colon or not address:
        raise ValueError(f"{uri!r}: expected tcp://ADDRESS:PORT")
    if port == "*":
        raise ValueError(f"{uri!r}: a wildcard port cannot be shared; give a port number")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"{uri!r}: the port must be a number from 1 to 65535")


def _uri(template: str, host: str, port: int | None, where: str) -> str:
    try:
        uri = format_uri(template, host, port)
        check_uri(uri)
    except ValueError as exc:
        raise UsageError(f"{where} {template!r}: {exc}") from None
    return uri


def _parent(value, rank: int, name: str, rank_by_name: dict, size: int,
            where: str) -> int | None:
    if value is None:
        return None if rank == 0 else 0
    if rank == 0:
        raise UsageError(f"{where}: parent is set on rank 0, the root of the tree, "
                         f"which has no parent")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise UsageError(f"{where}: parent must be a host name or a rank, not {value!r}")
    if isinstance(value, int):
        if not 0 <= value < size:
            raise UsageError(f"{where}: parent {value} is out of range (ranks 0-{size - 1})")
        parent = value
    else:
        if value not in rank_by_name:
            raise UsageError(f"{where}: parent {value!r} is not a host in hosts")
        parent = rank_by_name[value]
    if parent == rank:
        raise UsageError(f"{where}: parent refers to the host itself")
    return parent


def _check_tree(parents: list[int | None], rows) -> None:
    """Every rank's chain of parents must reach rank 0 (no cycles)."""
    reaches_root = {0}
    for rank in range(1, len(parents)):
        chain = [rank]
        r = parents[rank]
        while r not in reaches_root:
            if r in chain:
                names = " -> ".join(rows[x][1] for x in chain[chain.index(r):] + [r])
                i = rows[rank][0]
                raise UsageError(f"[bootstrap] hosts[{i}] ({rows[rank][1]}): parent keys "
                                 f"form a cycle ({names}) that never reaches rank 0")
            chain.append(r)
            r = parents[r]
        reaches_root.update(chain)


def _bad_hostname(name: str) -> str | None:
    """Why `name` is not a valid DNS name (RFC 1035 labels), or None."""
    if len(name) > 253:
        return "is longer than 253 characters"
    for label in name.split("."):
        if not _LABEL_RE.match(label):
            return ("is not a valid host name (letters, digits and '-' in labels of 1-63 "
                    "characters, not starting or ending with '-')")
    return None


def _opt_str(table: dict, key: str) -> str | None:
    value = table.get(key)
    if value is not None and not isinstance(value, str):
        raise UsageError(f"[bootstrap]: {key} must be a string, not {value!r}")
    return value
