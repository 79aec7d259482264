"""Broker attributes and instance configuration: one table, one parser per name.

Every attribute an instance knows is listed in ATTRIBUTES with its default,
how its value is checked, and whether it may change at run time.  The TOML
config (`--conf FILE`, see etc/fluxlite.toml) uses the same dotted names
(`[tbon] topo = ...` is `tbon.topo`), and `--setattr NAME=VALUE` overrides it.
Unknown names are errors everywhere: in config files, on the command line, in
`getattr`/`setattr`.
"""

from __future__ import annotations

import glob
import json
import os
import tomllib
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import FluxliteError, UsageError
from ..job import inventory, policy
from ..util import fsd, idset, tree
from . import flux_config


def _duration(v) -> str:
    fsd.parse(v)
    return v if isinstance(v, str) else f"{v}s"


def _at_least(minimum: float, *, none: bool = False) -> Callable[[object], str]:
    """A duration longer than 0 and at least `minimum` seconds (a broker would spin on
    a keepalive every nanosecond); with `none`, also 'none' for no timeout."""
    def check(v) -> str:
        seconds = fsd.parse_timeout(v) if none else fsd.parse(v)
        if seconds is not None:
            if seconds <= 0:
                raise ValueError(f"{v!r} must be longer than 0s")
            if seconds < minimum:
                raise ValueError(f"{v!r} is too short: at least {fsd.format(minimum)}")
        return v if isinstance(v, str) else f"{v}s"
    return check


def _limit_duration(v) -> str:
    """A duration, or empty for no limit."""
    return "" if v == "" else _duration(v)


def _limit_count(v) -> str:
    """A count, or empty for no limit."""
    return "" if v == "" else _uint(v)


def _idset(v) -> str:
    s = str(v)
    if s:
        idset.decode(s)
    return s


def _timeout(v) -> str:
    fsd.parse_timeout(v)
    return v if isinstance(v, str) else f"{v}s"


def _topo(v) -> str:
    tree.parse_topo(v)
    return v


def _uint(v) -> str:
    s = str(v)
    if not s.isdigit():
        raise ValueError(f"{v!r} is not a non-negative integer")
    return s


_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_size(v) -> int:
    """Bytes from '65536', '64k', '64M', '1g' (binary units)."""
    s = str(v).strip().lower().removesuffix("b").removesuffix("i")
    num, unit = (s[:-1], s[-1]) if s[-1:] in "kmg" else (s, "")
    if not num.isdigit():
        raise ValueError(f"{v!r} is not a size (bytes, or a number with k, M or G)")
    return int(num) * _SIZE_UNITS[unit]


def _size(v) -> str:
    n = parse_size(v)
    if not 4096 <= n <= 1 << 31:
        raise ValueError(f"{v!r} must be between 4k and 2G")
    return str(v)


def _queue(v) -> str:
    s = _uint(v)
    if not 16 <= int(s) <= 1_000_000:
        raise ValueError(f"{v!r} must be between 16 and 1000000 messages")
    return s


def _bool(v) -> str:
    s = str(v).lower()
    if s in ("1", "true", "yes", "on"):
        return "1"
    if s in ("0", "false", "no", "off"):
        return "0"
    raise ValueError(f"{v!r} is not a boolean (true/false)")


_SYSLOG = {"emerg": "0", "alert": "1", "crit": "2", "critical": "2", "err": "3",
           "error": "3", "warn": "4", "warning": "4", "notice": "5", "info": "6",
           "debug": "7"}


def _level(v) -> str:
    """A log level, kept as Flux keeps it: syslog's number, 0 (emerg) to 7 (debug);
    a name (debug, info, warning, error, ...) is taken for its number."""
    s = str(v).strip().lower()
    s = _SYSLOG.get(s, s)
    if s not in tuple("01234567"):
        raise ValueError(f"{v!r} is not a log level (0-7 as syslog's: 2 crit, 3 err, "
                         "4 warning, 6 info, 7 debug; or one of those names)")
    return s


def _quorum(v) -> str:
    s = str(v)
    if s and (not s.isdigit() or int(s) < 1):
        raise ValueError(f"{v!r} is not a number of brokers (1 or more; empty: all)")
    return s


def _taskmap(v) -> str:
    """An RFC 34 taskmap, [[nodeid, nnodes, ppn, repeat], ...], as JSON text."""
    try:
        blocks = json.loads(v) if isinstance(v, str) else v
    except ValueError:
        blocks = None
    if not isinstance(blocks, list) or not all(
            isinstance(b, list) and len(b) == 4
            and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in b)
            for b in blocks):
        raise ValueError(f"{v!r} is not an RFC 34 taskmap ([[NODEID,NNODES,PPN,REPEAT],"
                         " ...], integers)")
    return json.dumps(blocks, separators=(",", ":"))


def _critical(v) -> str:
    s = str(v)
    if s != "all" and s != "":
        idset.decode(s)
    return s


def _text(v) -> str:
    return str(v)


def _structured(checker):
    """A table or array of Flux's config ([queues], [policy], [[resource.config]]),
    kept as JSON text: from TOML it is the value, from --setattr its JSON."""
    def check(v) -> str:
        if isinstance(v, str):
            if v == "":
                return ""
            try:
                v = json.loads(v)
            except ValueError:
                raise ValueError(f"{v!r} is not JSON") from None
        try:
            checker(v, "value")
        except UsageError as exc:
            raise ValueError(exc.message) from None
        return json.dumps(v)
    check.checker = checker
    return check


# tables kept whole (not flattened into dotted names): Flux's own config keys
STRUCTURED = ("queues", "policy", "resource.config")


@dataclass(frozen=True)
class Attr:
    default: str | None
    check: Callable[[object], str]
    writable: bool  # may change while the instance runs
    help: str
    config: bool = True  # may be set from a config file / --setattr at start


ATTRIBUTES: dict[str, Attr] = {
    # identity, set by the broker itself
    "rank": Attr(None, _uint, False, "this broker's rank", config=False),
    "size": Attr(None, _uint, False, "number of brokers in the instance", config=False),
    "broker.pid": Attr(None, _uint, False, "process id of this broker", config=False),
    "version": Attr(None, _text, False, "fluxlite's version", config=False),
    "hostname": Attr(None, _text, False, "host name this rank reports", config=False),
    "hostlist": Attr(None, _text, False, "every rank's host name, in rank order (an RFC 29 "
                     "hostlist)", config=False),
    "local-uri": Attr(None, _text, False, "URI clients on this rank connect to", config=False),
    "rundir": Attr(None, _text, False, "private run directory (mode 0700)", config=False),
    "config.path": Attr(None, _text, False, "the config file or directory the instance "
                        "started with (--conf), which `config reload` reads again",
                        config=False),
    "config.sources": Attr(None, _text, False, "every config source the instance started "
                           "with (-c, --conf: paths and inline objects, as JSON), in order, "
                           "when more than config.path", config=False),
    "statedir": Attr("", _text, False, "directory whose database keeps the KVS (jobs, their "
                     "output, queues, drained ranks) across restarts; empty: nothing is kept"),
    "content.backing-path": Attr("", _text, False, "the state database file itself "
                                 "(default: STATEDIR/content.sqlite)"),
    "instance-level": Attr("0", _uint, False, "nesting depth: 0 for a top-level instance"),
    "jobid": Attr("", _text, False, "this instance's job id in its parent (nested only)"),
    "parent-uri": Attr("", _text, False, "URI of the enclosing instance (nested only)"),
    "parent-kvs-namespace": Attr("", _text, False, "the KVS namespace the enclosing "
                                 "instance gave this one's job (nested only)",
                                 config=False),
    "tbon.level": Attr(None, _uint, False, "depth of this rank in the tree", config=False),
    "tbon.maxlevel": Attr(None, _uint, False, "depth of the deepest rank", config=False),
    "tbon.descendants": Attr(None, _uint, False, "number of ranks below this one", config=False),
    "tbon.endpoint": Attr(None, _text, False, "endpoint children connect to", config=False),
    "tbon.parent-endpoint": Attr(None, _text, False, "endpoint of the parent", config=False),
    # tree and liveness
    "tbon.topo": Attr(tree.DEFAULT_TOPO, _topo, False, "tree shape: kary:K (kary:0 is flat)"),
    "tbon.keepalive-period": Attr("0.1s", _at_least(0.01), True,
                                  "how often each link sends a keepalive both ways"),
    "tbon.torpid-timeout": Attr("3s", _at_least(0.1), True,
                                "silence after which a peer is torpid (kept out of scheduling)"),
    "tbon.lost-timeout": Attr("10s", _at_least(0.1, none=True), True,
                              "silence after which a peer is declared lost ('none': never); "
                              "a closed connection is lost at once"),
    "tbon.connect-timeout": Attr("30s", _duration, False,
                                 "how long a broker waits for its parent to accept it"),
    # lifecycle
    "broker.quorum-timeout": Attr("30s", _timeout, False,
                                  "how long rank 0 waits for every rank to join before "
                                  "starting the initial program anyway"),
    "broker.quorum": Attr("", _quorum, False,
                          "brokers online before rank 0 starts the initial program "
                          "(empty: every rank)"),
    "broker.mapping": Attr(None, _taskmap, False,
                           "how brokers sit on nodes, an RFC 34 taskmap (set by `start "
                           "--test-pmi-clique`; [[0,1,N,1]]: N brokers on one node)",
                           config=False),
    "broker.recovery-mode": Attr("0", _bool, False,
                                 "1: the instance was started with `start --recovery`"),
    "broker.critical-ranks": Attr("", _critical, False,
                                  "ranks whose loss ends a nested instance: an idset, 'all', "
                                  "or empty for rank 0 plus every interior rank"),
    "broker.shutdown-timeout": Attr("10s", _duration, False,
                                    "how long shutdown waits for children before giving up"),
    "broker.cleanup-timeout": Attr("10s", _duration, False,
                                   "how long cleanup waits for running jobs to end"),
    "broker.rc2-none": Attr("0", _bool, False,
                            "run no initial program: the instance stays up until shutdown"),
    "broker.max-message-size": Attr("64M", _size, False,
                                    "largest message frame a peer or client may send "
                                    "(larger ones close its connection)"),
    "broker.client-queue": Attr("4096", _queue, False,
                                "messages that may wait for one local client; a client "
                                "that lets more pile up without reading is dropped"),
    "broker.client-queue-bytes": Attr("64M", _size, False,
                                      "bytes sent to one local client that it has not "
                                      "read yet; a client that lets more pile up is "
                                      "dropped"),
    # logging
    "log-stderr-level": Attr("3", _level, True, "lowest level printed on stderr"),
    "log-level": Attr("6", _level, True, "lowest level kept in the ring and log file"),
    "log-ring-size": Attr("1024", _uint, False, "log entries kept for `fluxlite dmesg`"),
    # resources and exec
    "resource.cores-per-rank": Attr("0", _uint, False,
                                    "cores each rank offers (0: all of this machine's cores)"),
    "resource.cores": Attr("", _idset, False,
                           "core ids each rank offers, e.g. 0-3 (overrides cores-per-rank; "
                           "set for nested instances)"),
    "resource.config": Attr("[]", _structured(inventory.check_config), False,
                            "Flux's [[resource.config]]: hosts with their cores, gpus and "
                            "properties (JSON with -S)"),
    "resource.path": Attr("", _text, False, "an R file (RFC 20) describing the resources"),
    "resource.noverify": Attr("0", _bool, False,
                              "trust the configured resources without checking them against "
                              "this machine"),
    "resource.exclude": Attr("", _text, False,
                             "ranks (an idset) or hosts (a hostlist) withheld from "
                             "scheduling, shown as excluded by `resource status`"),
    "access.allow-guest-user": Attr("0", _bool, False,
                                    "let users other than the owner (here only root can "
                                    "reach the socket) connect, with the user role"),
    "access.allow-root-owner": Attr("0", _bool, False,
                                    "give root the owner role (otherwise root is a guest)"),
    "queues": Attr("{}", _structured(policy.check_queues), False,
                   "Flux's [queues.NAME] tables: named queues (JSON with -S)"),
    "policy": Attr("{}", _structured(policy.check_policy), False,
                   "Flux's [policy] table: jobspec defaults and limits (JSON with -S)"),
    "exec.kill-timeout": Attr("5s", _duration, True,
                              "after SIGTERM, how long before tasks get SIGKILL"),
    "exec.shell-exit-timeout": Attr("30s", _timeout, True,
                                    "how long other shells may run after the leader shell "
                                    "exits normally ('none' disables)"),
    "exec.barrier-timeout": Attr("5m", _timeout, True,
                                 "how long shells may take to start before the job fails"),
    "job-manager.inactive-age-limit": Attr("", _limit_duration, True,
                                           "inactive jobs older than this are purged "
                                           "(empty: no age limit)"),
    "job-manager.inactive-num-limit": Attr("", _limit_count, True,
                                           "at most this many inactive jobs are kept, the "
                                           "oldest purged first (empty: no limit)"),
    "batch.persist": Attr("1", _bool, True,
                          "site default for batch/alloc: survive the loss of non-critical "
                          "ranks (1) or end on any lost rank (0)"),
}


def check(name: str, value, *, at_runtime: bool = False) -> str:
    """Validate `value` for attribute `name` and return it as a string."""
    spec = ATTRIBUTES.get(name)
    if spec is None:
        raise UsageError(f"unknown attribute {name!r} (see `fluxlite lsattr` for the list)")
    if at_runtime and not spec.writable:
        raise UsageError(f"attribute {name!r} cannot be changed while the instance runs")
    if not at_runtime and not spec.config:
        raise UsageError(f"attribute {name!r} is set by the broker and cannot be configured")
    try:
        return spec.check(value)
    except ValueError as exc:
        raise UsageError(f"invalid value for {name}: {exc}") from None


def parse_setattr(text: str) -> tuple[str, str]:
    """Split 'NAME=VALUE' from --setattr and validate it."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise UsageError(f"--setattr expects NAME=VALUE, got {text!r}")
    return name, check(name, value)


# Liveness defaults of an instance whose overlay is TCP (`fluxlite broker
# --config-path`): a loaded network or a busy host can hold a packet back for
# seconds, which the ipc defaults (3s torpid, 10s lost) would take for a dead
# broker.  30s torpid is Flux's torpid_max; 60s lost leaves twice that before
# a rank and its subtree are given up, and TCP_MAXRT (set to the lost timeout)
# ends a connection whose data goes unacknowledged as long.  Both stay tunable
# (config file or -S).
TCP_DEFAULTS = {"tbon.torpid-timeout": "30s", "tbon.lost-timeout": "60s"}


def read_toml(path: str) -> dict:
    """The TOML file at `path` (attribute tables or a `[bootstrap]` table): a file that
    cannot be read fails with its errno (NotFound...), bad TOML is a UsageError.
    A directory is Flux's config directory: its `*.toml` files in name order,
    each one's tables merged into the ones before (a key set twice: the later).
    A file named *.json is read as JSON, as Flux reads one (an object of tables)."""
    if os.path.isdir(path):
        merged: dict = {}
        for name in sorted(glob.glob(os.path.join(glob.escape(path), "*.toml"))):
            _merge(merged, read_toml(name))
        return merged
    try:
        with open(path, "rb") as f:
            if path.endswith(".json"):
                return _json_table(f.read(), path)
            return tomllib.load(f)
    except OSError as exc:
        raise FluxliteError.from_oserror(exc, f"cannot read config {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"config {path} is not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"config {path} is not valid TOML: not UTF-8 text (byte "
                         f"{exc.start})") from None
    except RecursionError:   # (the parsers recurse: thousands of nested tables or arrays)
        raise UsageError(f"config {path}: tables or arrays nested too deeply") from None


def _json_table(data: bytes, path: str) -> dict:
    try:
        table = json.loads(data)
    except ValueError as exc:
        raise UsageError(f"config {path} is not valid JSON: {exc}") from None
    if not isinstance(table, dict):
        raise UsageError(f"config {path}: a JSON config is an object of tables, not "
                         f"{type(table).__name__}")
    return table


def _merge(into: dict, table: dict) -> None:
    for key, value in table.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def load_config(path: str, *, bootstrap: bool = False) -> dict[str, str]:
    """Read a TOML config file into {dotted name: value}, rejecting unknown keys.

    A `[bootstrap]` table is read by boot_config (`fluxlite broker --config-path`):
    with `bootstrap` it is skipped here, otherwise it is refused."""
    return table_config(read_toml(path), f"config {path}", bootstrap=bootstrap)


def conf_options(attrs: dict[str, str]) -> list[str]:
    """The --conf options that give a broker started by command line the config
    sources of `attrs` (config.sources, else config.path), in order: paths as they
    are, config objects as JSON text (Flux's inline form)."""
    if "config.sources" in attrs:
        return [f"--conf={s if isinstance(s, str) else json.dumps(s)}"
                for s in json.loads(attrs["config.sources"])]
    return [f"--conf={attrs['config.path']}"] if "config.path" in attrs else []


def table_config(data: dict, where: str, *, bootstrap: bool = False) -> dict[str, str]:
    """load_config's reading of a config object already parsed (--conf text)."""
    if "bootstrap" in data:
        if not bootstrap:
            raise UsageError(f"{where}: a [bootstrap] table is read only by "
                             "`fluxlite broker --config-path FILE`")
        data = {k: v for k, v in data.items() if k != "bootstrap"}
    return config_values(data, where)


def config_values(data: dict, where: str) -> dict[str, str]:
    """The attributes a config object (TOML tables, as JSON) sets: {dotted name:
    value as checked}, with Flux's spellings (ALIASES) read as fluxlite's.  An
    unknown key of a table fluxlite reads is an error naming `where`; Flux's keys
    of no meaning here and other components' tables are left out.  (`where`
    empty: the message names the key alone.)"""
    out: dict[str, str] = {}
    _flatten(data, "", out, where)
    return out


def _flatten(table: dict, prefix: str, out: dict, where: str) -> None:
    for key, value in table.items():
        name = f"{prefix}{key}"
        if name in STRUCTURED:
            ATTRIBUTES[name].check.checker(value, f"{where}: {name}" if where else name)
            out[name] = json.dumps(value)
            continue
        if isinstance(value, dict):
            _flatten(value, f"{name}.", out, where)
            continue
        name = flux_config.ALIASES.get(name, name)
        if name not in ATTRIBUTES:
            if "." in name and flux_config.ignored(name):
                continue   # a Flux key or table of no meaning here
            if any(a.startswith(name + ".") for a in ATTRIBUTES):
                raise UsageError(f"{_at(where)}{name} is a table ([{name}]), not "
                                 f"{type(value).__name__} {_brief(value)}")
            raise UsageError(f"{_at(where)}unknown key {name!r}")
        if isinstance(value, bool):
            value = "1" if value else "0"
        if not ATTRIBUTES[name].config:
            raise UsageError(f"{_at(where)}{name} is set by the broker and cannot be "
                             "configured")
        try:
            out[name] = ATTRIBUTES[name].check(value)
        except ValueError as exc:
            raise UsageError(f"{_at(where)}invalid value for {name}: {exc}") from None


def _brief(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _at(where: str) -> str:
    return f"{where}: " if where else ""


def defaults() -> dict[str, str]:
    return {name: a.default for name, a in ATTRIBUTES.items() if a.default is not None}


def critical_ranks(attrs: dict[str, str], size: int) -> set[int]:
    """The ranks whose loss ends this instance: rank 0 plus every interior rank by default."""
    text = attrs.get("broker.critical-ranks", "")
    if text == "all":
        return set(range(size))
    if text:
        return idset.decode(text)
    return set(tree.critical_ranks(size, tree.parse_topo(attrs["tbon.topo"])))
