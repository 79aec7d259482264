"""Broker logging with structlog: one event per line, three sinks.

- a ring of recent entries that `fluxlite dmesg` prints (attr log-ring-size),
- JSON lines in the run directory (`<rundir>/broker-<rank>.log`, mode 0600
  whatever the umask: see open_private_log),
- key=value lines on stderr for entries at or above `log-stderr-level`.

Components log through `get_logger(component)`; `rank` is bound once per
process.  Entries below `log-level` are filtered before any processor runs.
`configure()` returns the process's LogSink, which owns the ring, the file
and the stderr threshold; the broker hands it to the service that answers
`broker.dmesg` and `attr.set log-*`.
"""

from __future__ import annotations

import collections
import json
import sys
import time


def _import_structlog():
    """structlog, imported without rich: structlog.dev imports rich when it is
    installed (fluxlite has it for `submit --progress`) to render tracebacks that
    fluxlite formats itself, ~35 ms of every broker's start.  rich stays importable
    for whoever asks for it later."""
    hidden = [name for name in ("rich", "better_exceptions") if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None   # `import rich` raises ImportError meanwhile
    try:
        import structlog
    finally:
        for name in hidden:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]
    return structlog


structlog = _import_structlog()

LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50,
          # Flux's syslog numbers: 0 emerg, 1 alert, 2 crit, 3 err, 4 warning,
          # 5 notice, 6 info, 7 debug
          "0": 50, "1": 50, "2": 50, "3": 40, "4": 30, "5": 20, "6": 20, "7": 10}

class LogSink:
    """The last structlog processor of a broker process: each entry goes to the
    ring (`entries()`, what dmesg prints), the JSON log file and, at or above the
    stderr level, stderr."""

    def __init__(self, rank: int | None, ring_size: int = 1024):
        self.rank = rank
        self.ring: collections.deque = collections.deque(maxlen=ring_size)
        self.file = None
        self.stderr_level = LEVELS["warning"]
        self.seq = 0
        self.listeners: list = []  # called with each new entry (dmesg -f)

    def __call__(self, _logger, method_name, event_dict):
        level = method_name if method_name != "warn" else "warning"
        if level == "exception":
            level = "error"
        entry = {"t": time.time(), "level": level, "rank": self.rank,
                 "component": event_dict.pop("component", "broker"),
                 "event": str(event_dict.pop("event", ""))}
        exc = event_dict.pop("exc_info", None)
        for k, v in event_dict.items():
            entry[k if k not in entry else f"{k}_"] = _plain(v)
        if exc:
            import traceback
            entry["traceback"] = "".join(traceback.format_exception(*sys.exc_info()))[-4000:]
        self.seq += 1
        entry["seq"] = self.seq
        self.ring.append(entry)
        for listener in self.listeners:
            listener(entry)
        if self.file is not None:
            try:
                self.file.write(json.dumps(entry, default=str) + "\n")
                self.file.flush()
            except (OSError, ValueError):
                pass
        if LEVELS.get(level, 20) >= self.stderr_level:
            try:
                sys.stderr.write(format_entry(entry) + "\n")
                sys.stderr.flush()
            except (OSError, ValueError):
                pass
        raise structlog.DropEvent

    def open(self, path: str) -> None:
        if self.file is not None:
            self.file.close()
        self.file = open_private_log(path)

    def set_levels(self, level: str | None = None, stderr_level: str | None = None) -> None:
        """Change the threshold of stderr, and of every entry (`log-level`)."""
        if stderr_level is not None:
            self.stderr_level = LEVELS[stderr_level]
        if level is not None:
            _config.level = LEVELS[level]

    def entries(self) -> list[dict]:
        return list(self.ring)

    def clear(self) -> None:
        self.ring.clear()


def _plain(v):
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    return str(v)


def format_entry(entry: dict, *, with_time: bool = True) -> str:
    """'2026-12-02T10:28:57.123 overlay.info[0]: event key=value' (used by dmesg too)."""
    skip = {"t", "level", "rank", "component", "event", "seq", "traceback"}
    kv = " ".join(f"{k}={_kv(v)}" for k, v in entry.items() if k not in skip)
    t = entry.get("t", 0.0)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t)) + f".{int(t % 1 * 1000):03d} "
    rank = entry.get("rank")
    head = f"{entry.get('component', 'broker')}.{entry.get('level', 'info')}[{rank}]"
    line = f"{stamp if with_time else ''}{head}: {entry.get('event', '')}"
    if kv:
        line += " " + kv
    if "traceback" in entry:
        line += "\n" + entry["traceback"].rstrip()
    return line


def _kv(v) -> str:
    if isinstance(v, str):
        return v if v and " " not in v and "=" not in v else json.dumps(v)
    return json.dumps(v, default=str)


def configure(rank: int | None, logfile: str | None = None, *, level: str = "info",
              stderr_level: str = "warning", ring_size: int = 1024) -> LogSink:
    """Route this process's structlog entries to a new LogSink (once per broker
    process) and return it."""
    sink = LogSink(rank, ring_size)
    if logfile is not None:
        sink.open(logfile)
    sink.stderr_level = LEVELS[stderr_level]
    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars, sink],
        wrapper_class=structlog.make_filtering_bound_logger(LEVELS["debug"]),
        cache_logger_on_first_use=False,
    )
    _config.level = LEVELS[level]
    _config.generation += 1
    return sink


def open_private_log(path: str):
    """Open a log for appending, readable and writable by its owner only, whatever the
    umask and whatever mode an old file of that name had (logs hold job commands,
    environments and errors).  A symlink in its place is refused (O_NOFOLLOW)."""
    import os
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                 0o600)
    try:
        os.fchmod(fd, 0o600)
        return os.fdopen(fd, "a", buffering=1)
    except BaseException:
        os.close(fd)
        raise


class _Config:
    """The process's `log-level` threshold, and a count of configure() calls (a
    Logger takes structlog's configuration anew when it changes)."""
    level = LEVELS["info"]
    generation = 0


_config = _Config()


def enabled(level: str) -> bool:
    """Whether entries of `level` are kept now (`log-level`): a caller may skip
    building an entry that costs something to build (a debug line per job event)."""
    return LEVELS[level] >= _config.level


class Logger:
    """One component's logger: the level check is an attribute read, so a debug
    line on a hot path costs next to nothing when debug is off (structlog's lazy
    proxy would build a bound logger per call).  Kept entries go through
    structlog as configured."""
    __slots__ = ("component", "_bound", "_generation")

    def __init__(self, component: str):
        self.component = component
        self._bound = None
        self._generation = -1

    def _emit(self, method: str, event: str, kw: dict) -> None:
        if self._generation != _config.generation:
            self._bound = structlog.get_logger().bind(component=self.component)
            self._generation = _config.generation
        getattr(self._bound, method)(event, **kw)


def _leveled(method: str, level: int):
    """Logger.<method>: kept only if `log-level` is at or below `level`."""
    def log(self: Logger, event: str, **kw) -> None:
        if _config.level <= level:
            self._emit(method, event, kw)
    log.__name__ = method
    return log


for _method in ("debug", "info", "warning", "error", "exception", "critical"):
    setattr(Logger, _method, _leveled(_method, LEVELS.get(_method, LEVELS["error"])))


def get_logger(component: str) -> Logger:
    """A logger for one component; lazy, so configure() may run after import."""
    return Logger(component)
