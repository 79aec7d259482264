"""Entry of a broker process: spawner first, then logging, then the event loop.

The order matters: the spawner is forked before this process creates any
ZeroMQ context (a forked child must never inherit one).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping

from ..protocol.admission import raise_nofile_limit
from ..util import log as blog
from ..util.compat import KVS_NAMESPACE_VARS
from ..util.proctitle import set_title
from .broker import Broker
from .placement import BrokerConfig, Runtime
from .spawner import start_spawner


def run_broker(cfg: BrokerConfig, env: Mapping[str, str] | None = None) -> int:
    """Run one broker to completion; returns its exit code.  `env` is the environment
    the instance hands its processes (default: this process's)."""
    from ..shell.main import preload, run_forked_shell, warm_spawner
    set_title(f"fluxlite-broker rank={cfg.rank} size={cfg.size} {cfg.rundir}")
    # as Flux's broker: a job's guest namespace is not this instance's, so what it
    # runs (the initial program of a batch or alloc first) works in its primary one
    runtime = Runtime(env={k: v for k, v in (os.environ if env is None else env).items()
                           if k not in KVS_NAMESPACE_VARS})
    bind_fd = cfg.placement.bind_fd
    runtime.spawner = start_spawner(f"fluxlite-spawner rank={cfg.rank}",
                                    os.path.join(cfg.rundir, f"shell-{cfg.rank}.log"),
                                    entry=run_forked_shell, preload=preload,
                                    warm=warm_spawner,
                                    close_fds=() if bind_fd is None else (bind_fd,),
                                    env=runtime.env)
    # descriptors: as many as allowed (the spawner, forked above, keeps the limit its
    # shells and tasks inherit); the connection guards keep a reserve below it
    raise_nofile_limit()
    a = cfg.attrs
    runtime.logs = blog.configure(cfg.rank, os.path.join(cfg.rundir, f"broker-{cfg.rank}.log"),
                                  level=a["log-level"], stderr_level=a["log-stderr-level"],
                                  ring_size=int(a["log-ring-size"]))
    return asyncio.run(Broker(cfg, runtime).run())
