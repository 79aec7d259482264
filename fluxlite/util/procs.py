"""Process-tree helpers for Linux: parent-death signals and killing whole trees.

Killing a broker must take its job shells and their tasks with it, as a node
failure would.  The pieces: every child gets PR_SET_PDEATHSIG right after
fork; the spawner is a child subreaper, so orphans are re-parented to it and
still counted as its descendants; and `kill_tree()` finds every descendant by
walking /proc (parent links and session ids) and SIGKILLs them in one pass.
"""

from __future__ import annotations

import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

_libc = None


def _prctl(option: int, arg: int) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.prctl(option, arg, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def set_pdeathsig(sig: int = signal.SIGKILL) -> None:
    """Ask the kernel to send `sig` to this process when its parent thread exits."""
    _prctl(PR_SET_PDEATHSIG, int(sig))


def set_child_subreaper() -> None:
    _prctl(PR_SET_CHILD_SUBREAPER, 1)


def release_free_memory() -> bool:
    """Hand the heap's free pages back to the kernel (glibc's malloc_trim), so that a
    peak that is over (thousands of jobs forgotten at once) stops counting in RSS.
    Elsewhere than glibc it does nothing; returns whether it ran."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    trim = getattr(_libc, "malloc_trim", None)
    if trim is None:
        return False
    trim(0)
    return True


def process_table() -> dict[int, tuple[int, int]]:
    """pid -> (ppid, session id) for every visible process."""
    table: dict[int, tuple[int, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        # the command name may contain spaces and parens: split after the last ')'
        rest = data[data.rfind(b")") + 2:].split()
        try:
            table[int(name)] = (int(rest[1]), int(rest[3]))
        except (IndexError, ValueError):
            continue
    return table


def children(pid: int) -> set[int]:
    """The live children of `pid`, from /proc/PID/task/*/children (no scan of /proc).

    Falls back to a scan of the process table on kernels without that file."""
    kids: set[int] = set()
    try:
        tids = os.listdir(f"/proc/{pid}/task")
        for tid in tids:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                kids.update(int(k) for k in f.read().split())
    except FileNotFoundError:
        return {p for p, (ppid, _) in process_table().items() if ppid == pid}
    except OSError:
        pass
    return kids


def _stat_field(pid: int, index: int) -> str | None:
    """Field `index` of /proc/PID/stat after the command name (0: the state), or None
    if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return data[data.rfind(b")") + 2:].split()[index].decode()
    except (OSError, IndexError):
        return None


def state(pid: int) -> str | None:
    """The state letter of `pid` (R, S, Z...), or None if it is gone."""
    return _stat_field(pid, 0)


def session_of(pid: int) -> int | None:
    """The session id of `pid`, or None if it is gone."""
    sid = _stat_field(pid, 3)
    return int(sid) if sid is not None and sid.lstrip("-").isdigit() else None


def start_time(pid: int) -> str | None:
    """When `pid` started (clock ticks since boot), or None if it is gone: with the pid,
    it names one process, never a later one that reuses the number."""
    return _stat_field(pid, 19)


def descendants(roots: set[int], sessions: set[int] = frozenset(),
                table: dict[int, tuple[int, int]] | None = None) -> set[int]:
    """Every process below `roots`, plus every member of `sessions` and its descendants."""
    table = process_table() if table is None else table
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    found: set[int] = {pid for pid, (_, sid) in table.items() if sid in sessions}
    frontier = list(roots | found)
    while frontier:
        pid = frontier.pop()
        for child in kids.get(pid, ()):
            if child not in found:
                found.add(child)
                frontier.append(child)
    return found - roots - {os.getpid()}


def kill_tree(roots: set[int], sessions: set[int] = frozenset(), *,
              include_roots: bool = False, sig: int = signal.SIGKILL) -> int:
    """SIGKILL everything below `roots` and in `sessions`; returns how many were signalled.

    Repeated until a pass finds nothing new, so a process forked while /proc
    was being read does not slip through."""
    done: set[int] = set()
    for _ in range(4):
        victims = descendants(roots, sessions)
        if include_roots:
            victims |= roots
        victims -= done | {os.getpid()}
        if not victims:
            break
        for pid in victims:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        done |= victims
    return len(done)


def wait_gone(pids, timeout: float) -> set[int]:
    """Wait on pidfds (no polling) until every pid has exited; returns the survivors."""
    import select
    import time
    fds = {}
    for pid in pids:
        try:
            fds[os.pidfd_open(pid)] = pid
        except OSError:
            pass
    deadline = time.monotonic() + timeout
    try:
        while fds:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select(list(fds), [], [], left)
            for fd in ready:
                fds.pop(fd)
                os.close(fd)
        return set(fds.values())
    finally:
        for fd in fds:
            os.close(fd)


def wait_status_to_exit_code(status: int) -> int:
    """Shell convention: the exit code, or 128+signal for a signalled process."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return 1


def describe_status(status: int) -> str:
    """'Exit 3', 'Killed', 'Segmentation fault' — how a process ended, as Flux says it."""
    if os.WIFSIGNALED(status):
        return signal_name(os.WTERMSIG(status))
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1
    if code > 128 and code - 128 < signal.NSIG:
        return signal_name(code - 128)
    return f"Exit {code}"


def signal_name(sig: int) -> str:
    try:
        return signal.strsignal(sig) or f"Signal {sig}"
    except ValueError:
        return f"Signal {sig}"
