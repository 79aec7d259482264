"""output: task stdout/stderr into the job's output eventlog, or into files.

Each shell appends its own tasks' output straight to `guest.output` in the
KVS (bytes that are not UTF-8 travel base64-encoded, so output is kept
exactly; no leader in the path, so no shell ever waits for another's output).
Data read in the same turn of the event loop goes out in one commit; a task's
streams end with an `eof` mark, which `run` and `job attach` wait for.
stdout is line-buffered (as in Flux), so lines of tasks writing at the same
time never splice together; stderr goes out as it comes.

Options: output.stdout.path / output.stderr.path write to files instead
("{{id}}" or "{id}" in the name is the job id; stderr follows stdout when only
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
from ...util import fluid
from ..plugin import ShellPlugin


LINE_LIMIT = 64 << 10  # a partial line longer than this goes out anyway
COMMIT_BYTES = 1 << 20  # output data in one KVS commit, at most (about)


def expand_path(template: str, jobid: int) -> str:
    f58 = fluid.f58(jobid)
    return template.replace("{{id}}", f58).replace("{{jobid}}", f58).replace("{id}", f58)


class Output(ShellPlugin):
    name = "output"

    def __init__(self, shell):
        super().__init__(shell)
        self.batch: list[dict] = []
        self._scheduled = False
        self.files: dict[str, int] = {}
        self.label = False
        self.lines = LineBuffer(LINE_LIMIT)
        shell.output_sinks.append(self)

    def shell_init(self) -> None:
        opts = self.shell.options
        out = opts.get("output.stdout.path")
        err = opts.get("output.stderr.path") or out
        self.label = bool(opts.get("output.label"))
        cwd = self.shell.jobspec["attributes"]["system"].get("cwd") or "/"
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        if opts.get("output.mode", "truncate") == "truncate" and self.shell.is_leader:
            flags |= os.O_TRUNC
        opened: dict[str, int] = {}
        for stream, template in (("stdout", out), ("stderr", err)):
            if not template:
                continue
            path = os.path.join(cwd, expand_path(str(template), self.shell.jobid))
            if path not in opened:
                try:
                    opened[path] = os.open(path, flags, 0o644)
                except OSError as exc:
                    raise ValueError(f"cannot open {stream} file {path}: {exc.strerror}") \
                        from None
            self.files[stream] = opened[path]
        if self.files and self.shell.is_leader:
            self.shell.output_append([entry("redirect", {"stream": s, "rank": "all",
                                                         "path": expand_path(str(t),
                                                                             self.shell.jobid)})
                                      for s, t in (("stdout", out), ("stderr", err)) if t])

    def add(self, task, stream: str, data: bytes, eof: bool = False) -> None:
        key = (task.rank, stream)
        fd = self.files.get(stream)
        if stream == "stdout" or (fd is not None and self.label):
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
                self.shell.output_append(chunk)
                chunk, size = [], 0
            chunk.append(e)
            size += n
        if chunk:
            self.shell.output_append(chunk)

    def shell_exit(self) -> None:
        for fd in set(self.files.values()):
            os.close(fd)
        self.files.clear()
