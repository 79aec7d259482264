"""The router's way out of a broker: the overlay's sockets and the local endpoint,
and, with a state directory, the hold that keeps rank 0 from acknowledging what
is not yet on disk."""

from __future__ import annotations

import asyncio
import collections

CHILDREN = "children"   # the destination of what goes to every child (held-count key)


class BrokerLinks:
    """The router's way out: the overlay's sockets and the local endpoint.

    With a state directory, rank 0 acknowledges only what is on disk: a message
    leaving the broker waits, in order, until the store's write-out it may depend
    on (`needed()`: the one that will carry what is in memory now) is synced
    (`synced`).  Holding one asks the store for that sync (`demand`: the store
    syncs only when something waits); each sync releases every message it
    covers.

    An answer to the instance's own job shells (a response with the INSTANCE flag)
    need not wait: what a shell is told reaches users only through messages that
    do (a job's events, its output as `attach` reads it), and the processes a job
    starts wait for its alloc to be on disk (`durable`).  Such an answer
    still keeps its order: it waits if anything for the same destination does."""

    __slots__ = ("b", "store", "held", "held_for", "waiters")

    def __init__(self, broker):
        self.b = broker            # the Broker: its overlay and local endpoint, once made
        self.store = None          # a durable kvs_store.Store, once one is in use
        self.held: collections.deque = collections.deque()   # (write-out, dest, send, args)
        self.held_for: collections.Counter = collections.Counter()   # dest -> held
        self.waiters: list[tuple[int, asyncio.Future]] = []   # durable()'s, (write-out, future)

    def hold_until_durable(self, store) -> None:
        self.store = store
        store.on_durable.append(self._release)

    def _hold(self, dest, send, *args, instance: bool = False) -> bool:
        """Whether the message must wait (it is then kept to be sent in order)."""
        store = self.store
        if store is None:
            return False
        need = store.needed()
        if not self.held:
            if need <= store.synced or instance:
                return False
        elif instance and not self.held_for[dest] and not (
                type(dest) is int and self.held_for[CHILDREN]):
            return False
        if need > store.synced:
            store.demand(need)
        self.held.append((need, dest, send, args))
        self.held_for[dest] += 1
        return True

    def _release(self) -> None:
        held, held_for, synced = self.held, self.held_for, self.store.synced
        while held and held[0][0] <= synced:
            _, dest, send, args = held.popleft()
            if held_for[dest] > 1:
                held_for[dest] -= 1
            else:
                del held_for[dest]
            send(*args)
        if self.waiters:
            waiting = []
            for need, done in self.waiters:
                if need > synced:
                    waiting.append((need, done))
                elif not done.done():
                    done.set_result(None)
            self.waiters = waiting

    def write_out(self) -> int:
        """The write-out that what is known now will be on disk with, synced from now
        on (0: no state directory)."""
        store = self.store
        if store is None:
            return 0
        need = store.needed()
        if need > store.synced:
            store.demand(need)
        return need

    async def durable(self, need: int) -> None:
        """Return once write-out `need` is on disk."""
        store = self.store
        if store is None or need <= store.synced:
            return
        done = asyncio.get_running_loop().create_future()
        self.waiters.append((need, done))
        store.demand(need)
        await done

    def parent_connected(self) -> bool:
        return self.b.overlay is not None and self.b.overlay.parent_connected()

    def send_parent(self, frames: list[bytes], instance: bool = False) -> None:
        if not self._hold("parent", self._send_parent, frames, instance=instance):
            self._send_parent(frames)

    def _send_parent(self, frames: list[bytes]) -> None:
        self.b.overlay.send_parent(frames)

    def child_state(self, rank: int) -> str:
        return self.b.overlay.child_state(rank) if self.b.overlay is not None else "offline"

    def send_child(self, rank: int, frames: list[bytes], instance: bool = False) -> bool:
        return (self._hold(rank, self._send_child, rank, frames, instance=instance)
                or self._send_child(rank, frames))

    def _send_child(self, rank: int, frames: list[bytes]) -> bool:
        return self.b.overlay is not None and self.b.overlay.send_child(rank, frames)

    def send_children(self, frames: list[bytes]) -> None:
        if not self._hold(CHILDREN, self._send_children, frames):
            self._send_children(frames)

    def _send_children(self, frames: list[bytes]) -> None:
        if self.b.overlay is not None:
            self.b.overlay.send_children(frames)

    def send_client(self, ident: bytes, frames: list[bytes], instance: bool = False) -> bool:
        return (self._hold(ident, self._send_client, ident, frames, instance=instance)
                or self._send_client(ident, frames))

    def _send_client(self, ident: bytes, frames: list[bytes]) -> bool:
        return self.b.local is not None and self.b.local.send(ident, frames)
