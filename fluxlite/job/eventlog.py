"""Eventlog entries and where a job's data lives in the KVS.

An entry is {timestamp, name, context}.  A job's records, under its dotted
hex id (`job.0000.0004.b200.0000`):

    jobspec              the submitted jobspec
    R                    the resources it was given
    eventlog             main eventlog: submit, validate, depend, priority, alloc,
                         start, exception, finish, release, free, clean
    guest.exec.eventlog  init, starting, shell.init, shell.start, shell.task-exit, ...
    guest.output         output eventlog: header, data, eof (stdout/stderr per task)
    guest.input          input eventlog: data, eof (what `run` forwards from its stdin)
"""

from __future__ import annotations

import json
import time

from ..util import fluid

PATHS = {"eventlog": "eventlog", "exec": "guest.exec.eventlog", "output": "guest.output",
         "input": "guest.input", "main": "eventlog"}


def job_key(jobid: int, *parts: str) -> str:
    return ".".join(["job", fluid.dothex(jobid), *parts])


def eventlog_key(jobid: int, path: str = "eventlog") -> str:
    """KVS key of a job eventlog named by its short path: eventlog, exec, output."""
    return job_key(jobid, PATHS.get(path, path))


def entry(name: str, context: dict | None = None, timestamp: float | None = None) -> dict:
    e = {"timestamp": time.time() if timestamp is None else timestamp, "name": name}
    if context:
        e["context"] = context
    return e


def format_entry(e: dict, *, human: bool = False, t0: float | None = None,
                 stamp: str | None = None) -> str:
    """'1796207331.961088 submit userid=0 urgency=16' (Flux's eventlog text format);
    `stamp` in place of the raw time (a TimeFormat's)."""
    ts = e.get("timestamp", 0.0)
    if stamp is not None:
        pass
    elif human and t0 is not None:
        stamp = f"[{ts - t0:+.6f}]"
    else:
        stamp = f"{ts:.6f}"
    ctx = e.get("context") or {}
    parts = [stamp, str(e.get("name", ""))]
    for k, v in ctx.items():
        parts.append(f"{k}={json.dumps(v, separators=(',', ':'), ensure_ascii=False)}")
    return " ".join(parts)


class TimeFormat:
    """The times of Flux's eventlog printers (-T raw, iso, offset; -H human): raw
    seconds, local ISO 8601 with microseconds, seconds since the first entry, or the
    date at each new minute (`[Dec06 09:02]`) and seconds since it within the minute
    (`[  +0.000123]`).  One instance for the lines of one listing."""

    FORMATS = ("raw", "iso", "offset", "human")

    def __init__(self, fmt: str = "raw"):
        self.fmt = fmt
        self.t0: float | None = None          # offset: the first entry's time
        self.minute: tuple | None = None      # human: the minute last printed as a date
        self.mark = 0.0                       # human: that date line's time

    def __call__(self, ts: float) -> str:
        import datetime
        if self.fmt == "offset":
            self.t0 = ts if self.t0 is None else self.t0
            return f"{ts - self.t0:.6f}"
        if self.fmt == "iso":
            when = datetime.datetime.fromtimestamp(ts).astimezone()
            off = when.strftime("%z")
            tz = "Z" if off in ("+0000", "") else f"{off[:3]}:{off[3:]}"
            return when.strftime("%Y-%m-%dT%H:%M:%S.%f") + tz
        if self.fmt == "human":
            when = datetime.datetime.fromtimestamp(ts)
            minute = when.timetuple()[:5]
            if minute == self.minute:
                return f"[{ts - self.mark:+11.6f}]"
            self.minute, self.mark = minute, ts
            return when.strftime("[%b%d %H:%M]")
        return f"{ts:.6f}"


# output and input eventlog `data` entries
def encode_data(data: bytes) -> dict:
    """{data: text} when the bytes are UTF-8, else {data: base64, encoding: base64} (as Flux)."""
    try:
        return {"data": data.decode("utf-8")}
    except UnicodeDecodeError:
        import base64
        return {"data": base64.b64encode(data).decode(), "encoding": "base64"}


def decode_data(ctx: dict) -> bytes:
    if ctx.get("encoding") == "base64":
        import base64
        return base64.b64decode(ctx["data"])
    return ctx["data"].encode("utf-8")


class LineBuffer:
    """Whole lines out of a stream of chunks, keeping one unfinished tail per key
    (a task's stream).  The one line splitter: the shell's output plugin (stdout is
    line-buffered, labelled files) and `run -l` on the terminal both use it."""

    def __init__(self, limit: int | None = None):
        self.limit = limit          # a tail this long goes out anyway (no newline coming)
        self._tails: dict = {}

    def take(self, key, data: bytes, eof: bool = False) -> bytes:
        """What can go out now: up to the last newline, or everything at end of
        stream or once the tail reaches `limit` bytes."""
        buf = self._tails.pop(key, b"") + data
        cut = buf.rfind(b"\n") + 1
        if eof or (self.limit is not None and len(buf) - cut >= self.limit):
            return buf
        if cut < len(buf):
            self._tails[key] = buf[cut:]
        return buf[:cut]

    def tails(self) -> list:
        """Every unfinished tail, (key, bytes), removed from the buffer."""
        out, self._tails = list(self._tails.items()), {}
        return out


def label_lines(prefix: str, data: bytes) -> bytes:
    """Each line of `data` with `prefix` in front; an unfinished last line is ended."""
    if not data:
        return b""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    p = prefix.encode()
    return b"".join(p + line + b"\n" for line in lines)
