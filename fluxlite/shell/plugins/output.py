"""output: task stdout/stderr into the job's output eventlog, or into files.

Each shell appends its own tasks' output straight to `guest.output` in the
KVS (bytes that are not UTF-8 travel base64-encoded, so output is kept
exactly; no leader in the path, so no shell ever waits for another's output).
Data read in the same turn of the event loop goes out in one commit; a task's
streams end with an `eof` mark, which `run` and `job attach` wait for.
stdout is line-buffered (as in Flux), so lines of tasks writing at the same
time never splice together; stderr goes out as it comes.

Options: output.stdout.path / output.stderr.path write to files instead
(mustache tags expand, fluxlite.util.mustache: "{{id}}" or "{id}" is the job
id, "{{taskid}}" gives each task its own file; stderr follows stdout when only
stdout is named), output.label prefixes every line with "RANK: ",
output.mode=truncate|append: a file is emptied when the job starts (the
default, as in Flux) or added to.  Only the leader truncates, during
shell.init; every shell writes in append mode, and no task writes before the
init barrier, so no shell's output is cut off by another's open.
"""

from __future__ import annotations

import asyncio
import os

from ...job.eventlog import LineBuffer, encode_data, entry, label_lines
from ...util import mustache
from ..plugin import ShellPlugin

LINE_LIMIT = 64 << 10  # a partial line longer than this goes out anyway
COMMIT_BYTES = 1 << 20  # output data in one KVS commit, at most (about)


def expand_path(template: str, values: dict[str, str]) -> str:
    """A file name with its mustache tags expanded ("{id}" is the job id too)."""
    return mustache.render(template, values).replace("{id}", values["id"])


class Output(ShellPlugin):
    name = "output"

    def __init__(self, shell):
        super().__init__(shell)
        self.batch: list[dict] = []
        self._scheduled = False
        self.files: dict[tuple[str, int], int] = {}   # (stream, task rank) -> fd
        self.label = False
        self.unbuffered = False
        self.lines = LineBuffer(LINE_LIMIT)
        shell.add_output_sink(self)

    def shell_init(self) -> None:
        opts = self.shell.options
        out = opts.get("output.stdout.path")
        err = opts.get("output.stderr.path") or out
        self.label = bool(opts.get("output.label") or opts.get("output.stdout.label"))
        # -u: stdout as it comes, not a line at a time
        self.unbuffered = opts.get("output.stdout.buffer.type") == "none"
        cwd = self.shell.jobspec["attributes"]["system"].get("cwd") or "/"
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        truncate = opts.get("output.mode", "truncate") == "truncate"
        opened: dict[str, int] = {}
        redirects = []
        for stream, template in (("stdout", out), ("stderr", err)):
            if not template:
                continue
            template = str(template)
            # a name that differs by task is opened (and truncated) by the task's shell;
            # one name for the whole job by every shell, truncated by the leader only
            local = mustache.per_task(template)
            for rank in self.shell.task_ranks:
                name = expand_path(template, self.shell.mustache_values(rank))
                path = os.path.join(cwd, name)
                if path not in opened:
                    mode = flags | os.O_TRUNC if truncate and (local or self.shell.is_leader) \
                        else flags
                    try:
                        opened[path] = os.open(path, mode, 0o644)
                    except OSError as exc:
                        raise ValueError(f"cannot open {stream} file {path}: "
                                         f"{exc.strerror}") from None
                self.files[(stream, rank)] = opened[path]
                if local:
                    redirects.append(entry("redirect", {"stream": stream, "rank": str(rank),
                                                        "path": name}))
            if not local and self.shell.is_leader:
                redirects.append(entry("redirect", {
                    "stream": stream, "rank": "all",
                    "path": expand_path(template, self.shell.mustache_values())}))
        if redirects:
            self.shell.append_eventlog("output", redirects)

    def add(self, task, stream: str, data: bytes, eof: bool = False) -> None:
        key = (task.rank, stream)
        fd = self.files.get((stream, task.rank))
        if (stream == "stdout" and not self.unbuffered) or (fd is not None and self.label):
            # stdout is line-buffered, as in Flux: the lines of tasks writing at once
            # never splice into one another (stderr goes out as it comes)
            data = self.lines.take(key, data, eof)
        if fd is not None:
            if data:
                self._write_file(fd, task, data, eof)
            data = b""
        if not data and not eof:
            return
        ctx = {"stream": stream, "rank": str(task.rank)}
        if data:
            ctx.update(encode_data(data))
        if eof:
            ctx["eof"] = True
        self.batch.append(entry("data", ctx))
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def _write_file(self, fd: int, task, data: bytes, eof: bool) -> None:
        if self.label:
            # a last line without its newline still ends the task's line in the file
            data = label_lines(f"{task.rank}: ", data)
        os.write(fd, data)

    def flush(self) -> None:
        """Commit what the tasks wrote, in commits of about COMMIT_BYTES at most (the
        KVS decodes no commit larger than BULK_PAYLOAD)."""
        self._scheduled = False
        batch, self.batch = self.batch, []
        chunk, size = [], 0
        for e in batch:
            n = len(e.get("context", {}).get("data", ""))
            if chunk and size + n > COMMIT_BYTES:
                self.shell.append_eventlog("output", chunk)
                chunk, size = [], 0
            chunk.append(e)
            size += n
        if chunk:
            self.shell.append_eventlog("output", chunk)

    def shell_exit(self) -> None:
        for fd in set(self.files.values()):
            os.close(fd)
        self.files.clear()
