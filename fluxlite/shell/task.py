"""One task: a real subprocess in its own process group, its output pipes and its exit.

Exit is noticed through a pidfd in the event loop (no SIGCHLD handler, no
polling).  A task is complete when its process has exited and what it wrote
before exiting has been read; a background process that keeps the pipes
open does not hold the task (or the job) up.
"""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import subprocess
from collections.abc import Sequence

from ..util import procs


class Task:
    def __init__(self, localid: int, rank: int, argv: list[str], env: dict, cwd: str):
        self.localid = localid
        self.rank = rank            # global task rank
        self.argv = list(argv)
        self.env = dict(env)
        self.cwd = cwd
        self.pid: int | None = None
        self.status: int | None = None   # wait status
        self.proc: subprocess.Popen | None = None
        self.start_error: str | None = None
        self.done = asyncio.get_running_loop().create_future()
        self._pidfd: int | None = None
        self._pipes: dict[int, str] = {}
        self.pass_fds: tuple[int, ...] = ()
        self.stdin = subprocess.DEVNULL
        self.stdout = subprocess.PIPE
        self.stderr = subprocess.PIPE
        self.start_new_session = False
        self.setpgrp = True  # its own process group (-o nosetpgrp: the shell's)
        self.preexec = None  # run in the child before exec (resource limits)
        self.cpus: set[int] | None = None   # cores to bind the task to (affinity plugin)

    @property
    def exitcode(self) -> int | None:
        return None if self.status is None else procs.wait_status_to_exit_code(self.status)

    @property
    def signaled(self) -> int:
        return os.WTERMSIG(self.status) if self.status is not None and \
            os.WIFSIGNALED(self.status) else 0

    def disposition(self) -> str:
        return procs.describe_status(self.status or 0)

    def start(self, on_output, early_signals: Sequence[int] = ()) -> None:
        """Start the process, then send it `early_signals` (sent to the job before it
        existed); on failure `start_error` says why and the task exits 127."""
        loop = asyncio.get_running_loop()
        shell_cpus = None
        try:
            if self.cpus:
                # the task inherits the binding at fork: bound from its first instruction
                shell_cpus = os.sched_getaffinity(0)
                os.sched_setaffinity(0, self.cpus)
            self.proc = subprocess.Popen(
                self.argv, env=self.env, cwd=self.cwd, stdin=self.stdin, stdout=self.stdout,
                stderr=self.stderr, close_fds=True, pass_fds=self.pass_fds,
                process_group=0 if self.setpgrp and not self.start_new_session else None,
                start_new_session=self.start_new_session, preexec_fn=self.preexec)
        except OSError as exc:
            what = self.argv[0] if exc.filename in (None, self.argv[0]) else exc.filename
            if exc.filename == self.cwd:
                self.start_error = f"cannot change directory to {self.cwd}: {exc.strerror}"
            else:
                self.start_error = f"{what}: {exc.strerror}"
            # as a shell says it: 127 not found, 126 found but not executable
            self.status = (126 if exc.errno in (errno.EACCES, errno.EISDIR, errno.ENOEXEC)
                           else 127) << 8
            self.done.set_result(None)
            return
        finally:
            if shell_cpus is not None:
                os.sched_setaffinity(0, shell_cpus)
        self.pid = self.proc.pid
        for sig in early_signals:
            self.kill(sig)
        for stream, pipe in (("stdout", self.proc.stdout), ("stderr", self.proc.stderr)):
            if pipe is None:
                continue
            fd = pipe.fileno()
            os.set_blocking(fd, False)
            self._pipes[fd] = stream
            loop.add_reader(fd, self._read, fd, on_output)
        self._pidfd = os.pidfd_open(self.pid)
        loop.add_reader(self._pidfd, self._reap, on_output)

    def _read(self, fd: int, on_output) -> None:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        stream = self._pipes.get(fd)
        if stream is None:
            return
        if data:
            on_output(self, stream, data)
        else:
            self._close_pipe(fd, on_output)

    def _close_pipe(self, fd: int, on_output) -> None:
        stream = self._pipes.pop(fd, None)
        if stream is None:
            return
        asyncio.get_running_loop().remove_reader(fd)
        on_output(self, stream, b"", eof=True)

    def _reap(self, on_output) -> None:
        loop = asyncio.get_running_loop()
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            pid, status = self.pid, 0
        if pid == 0:
            return
        loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        self._pidfd = None
        self.status = status
        self.proc.returncode = procs.wait_status_to_exit_code(status)
        # drain what the task wrote before it exited, then stop listening
        for fd in list(self._pipes):
            while fd in self._pipes:
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    break
                except OSError:
                    data = b""
                if data:
                    on_output(self, self._pipes[fd], data)
                else:
                    self._close_pipe(fd, on_output)
            if fd in self._pipes:
                self._close_pipe(fd, on_output)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
        if not self.done.done():
            self.done.set_result(None)

    def kill_group(self) -> None:
        """SIGKILL what is left in the task's process group once the task is done."""
        if self.pid is not None and (self.setpgrp or self.start_new_session):
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def kill(self, sig: int) -> None:
        """Signal the task's whole process group."""
        if self.pid is None or self.status is not None:
            return
        try:
            if not (self.setpgrp or self.start_new_session):
                raise ProcessLookupError  # in the shell's group: the task alone
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass
