"""The warm fork server: how a broker starts job shells and other local processes.

Each broker forks its spawner first thing, before it opens any ZeroMQ socket,
so the spawner holds no context that a child could inherit.  The spawner has
the job shell's modules already imported: a shell is a plain fork of it (no
interpreter start-up), and creates its own ZeroMQ context after the fork.

Two processes, two modules: server.py is the spawner process (its methods, the
fork and exec, reaping, the node-model kills), client.py the broker's end
(Spawner.spawn / kill / killall, each process's `started` and `exited`).  They
talk over a Unix socket pair in the one codec, as requests and responses.

The spawner knows no job shell: what a "shell" process runs is the `entry`
function the broker gives start_spawner() (fluxlite.shell.main.run_forked_shell);
`preload` (fluxlite.shell.main.preload) imports its modules before the first fork,
and `warm` (fluxlite.shell.main.warm_spawner) runs once the first shell is forked,
so later shells start warm and an instance that runs no job never pays for it.
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import traceback

from ...util import procs
from ...util.proctitle import set_title
from .client import SpawnedProcess, Spawner
from .server import SpawnServer

__all__ = ["SpawnedProcess", "Spawner", "start_spawner"]


def start_spawner(name: str, shell_log: str | None = None, *, entry=None,
                  preload=None, warm=None, close_fds: tuple[int, ...] = (),
                  env: dict[str, str] | None = None) -> Spawner:
    """Fork the spawner.  Call before this process creates any ZeroMQ context.

    `entry(info, env, tmpdir)` is what a "shell" process runs; `preload()` imports what it
    needs, once, before the first fork; `warm()` runs once the first shell is
    forked; `close_fds` are the broker's own (its overlay's listening socket),
    which the spawner and its shells must not hold;
    `env` is the environment of every child whose request names none (default:
    this process's).  The spawner gets SIGTERM when this process dies."""
    env = dict(os.environ) if env is None else env
    parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    broker_pid = os.getpid()
    pid = os.fork()
    if pid == 0:
        parent_sock.close()
        for fd in close_fds:
            os.close(fd)
        code = 0
        try:
            # its own process group: a signal sent to the broker's group (a nested
            # broker is a job's task) is for the broker, which decides what to do
            os.setpgid(0, 0)
            procs.set_pdeathsig(signal.SIGTERM)
            procs.set_child_subreaper()
            set_title(name)
            if os.getppid() != broker_pid:  # the broker died before PDEATHSIG was armed
                os._exit(1)
            if preload is not None:
                preload()
            # what exists now lives as long as the spawner: keep it out of the
            # collector, so a forked shell's collections neither walk it nor write
            # to its pages (each write copies a page the shell shares with us)
            gc.freeze()
            SpawnServer(child_sock, shell_log=shell_log, entry=entry, env=env,
                        warm=warm).run()
        except BaseException:
            traceback.print_exc()
            code = 1
        os._exit(code)
    child_sock.close()
    return Spawner(parent_sock, pid)
