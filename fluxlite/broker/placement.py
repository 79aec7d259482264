"""What a broker is started with: where it sits (Placement), what it runs
(BrokerConfig), and what lives with its process (Runtime).

Each bootstrap produces one frozen Placement and nothing else decides it: the
local launcher (launcher.py: every rank on this machine, ipc:// in the run
directory), PMI (nested.py: hosts, endpoints and keys exchanged through the
launcher's PMI) and the config file (boot_config.py: the `[bootstrap]` hosts).
BrokerConfig adds the instance the broker serves (attributes, run directory,
initial program).  Runtime is made by run_broker() in the broker process itself:
the spawner it forked, its log sink and the environment it hands its processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..overlay.overlay import Curve
from ..util import tree

if TYPE_CHECKING:
    from ..util.log import LogSink
    from .spawner import Spawner


@dataclass(frozen=True)
class Placement:
    """Where one broker sits in its instance's tree, as its bootstrap decided."""
    rank: int
    size: int
    topology: tree.Topology
    hosts: tuple[str, ...]              # every rank's host name, in rank order
    bind_endpoint: str | None = None    # where this rank's children connect (None: none)
    parent_endpoint: str | None = None  # where this rank connects (None: rank 0)
    curve: Curve | None = None          # keys of its TCP links: its own, its parent's,
                                        # the peers allowed to connect
    bind_fd: int | None = None          # the TCP socket bind_endpoint names, already bound
    insecure: bool = False              # plain TCP links (tests only)

    @property
    def parent(self) -> int | None:
        return self.topology.parent(self.rank)

    @property
    def children(self) -> tuple[int, ...]:
        return tuple(self.topology.children(self.rank))

    @property
    def parent_key(self) -> bytes | None:
        """The public key the parent presents, on a CURVE link."""
        return self.curve.parent_public if self.curve is not None else None


def local_placement(rank: int, topology: tree.Topology, rundir: str,
                    hosts: tuple[str, ...]) -> Placement:
    """A rank of an instance whose brokers all run on this machine (`fluxlite start`):
    its tree over ipc:// sockets in the shared run directory."""
    parent = topology.parent(rank)
    return Placement(rank=rank, size=topology.size, topology=topology, hosts=hosts,
                     bind_endpoint=f"ipc://{rundir}/tbon-{rank}"
                     if topology.children(rank) else None,
                     parent_endpoint=None if parent is None else f"ipc://{rundir}/tbon-{parent}")


@dataclass(frozen=True)
class BrokerConfig:
    """Everything one broker is told before it starts: its placement and its instance."""
    placement: Placement
    attrs: dict[str, str]       # the instance's attributes (the broker keeps its own copy)
    rundir: str
    local_path: str             # its local endpoint: clients reach local://LOCAL_PATH
    initial_program: list[str] | None = None    # rank 0's, if any
    initial_pgid: int | None = None   # the process group the initial program joins
    interactive: bool = False   # the initial program owns a terminal: end it with SIGHUP
    nested: bool = False        # a batch/alloc job's instance (tells its parent where it is)
    resources: dict[int, list[int]] | None = None   # nested: each rank's allocated cores
    gpus: dict[int, list[int]] | None = None        # nested: each rank's GPUs

    @property
    def rank(self) -> int:
        return self.placement.rank

    @property
    def size(self) -> int:
        return self.placement.size


@dataclass
class Runtime:
    """What lives with the broker process, made in it by run_broker()."""
    env: dict[str, str]         # what the instance hands its processes (initial program,
                                # job shells, rexec'd commands); the process's own stays
    spawner: Spawner | None = None   # forked first thing, before any ZeroMQ context
    logs: LogSink | None = None      # `dmesg` reads its ring
