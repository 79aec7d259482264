"""The one direct way into the KVS that rank 0's services keep: `KVSDirect`.

Services reach each other by messages, which the router hands over on a later
turn of the loop.  The job-manager, job-exec and resource write and read their
own records (eventlogs, jobspecs, R, the checkpoint) at every state change of
every job; a kvs.commit request for each would cost a message, an encode and a
loop turn where a call does, on the path that sets `run` latency and `submit
--cc` throughput.  So those calls stay direct, through this interface and
nothing more: the broker hands each of those services `view(kvs)`, an object
with these members only, and tests/unit/test_service_interfaces.py checks that
the services use nothing else of it.  A commit through it is kvs.commit's own
(all or nothing, watchers told), so a client sees no difference.  A restart
from a state directory (jm_restart.py) reads the tree in memory and the state
database's summaries through it too, the fastest way there is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .kvs_store import Store
    from .kvs_tree import Dir


@runtime_checkable
class KVSDirect(Protocol):
    durable: bool      # the KVS outlives the instance (a state directory)
    # what a restart reads in memory (jm_restart.py): the primary namespace's tree,
    # and the state database (its summaries of inactive jobs)
    root: Dir
    store: Store

    def lookup(self, key: str):
        """The value at `key` (NotFound, or IsADirectory for a directory)."""

    def value(self, node):
        """The value a node of `root` stands for (read from the store if kept there)."""

    def commit(self, ops: list[dict]) -> int:
        """kvs.commit's operations, all or nothing, in the primary namespace."""

    def append(self, key: str, *entries) -> None:
        """Append entries to the eventlog at `key`."""


class _View:
    """KVSDirect over a KVS service: its bound methods and its tree, nothing else."""

    __slots__ = ("durable", "root", "store", "lookup", "value", "commit", "append")

    def __init__(self, kvs):
        self.durable = bool(kvs.durable)   # fixed when the store is opened
        self.root, self.store = kvs.root, kvs.store   # made once, changed in place
        self.lookup, self.value = kvs.lookup, kvs._value
        self.commit, self.append = kvs.commit, kvs.append


def view(kvs) -> KVSDirect:
    """The KVSDirect of a KVS service, for the services the broker gives it to."""
    return _View(kvs)
