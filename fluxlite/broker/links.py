"""The router's way out of a broker: the overlay's sockets and the local endpoint,
and, with a state directory, the hold that keeps rank 0 from acknowledging what
is not yet on disk."""

from __future__ import annotations

import collections


class BrokerLinks:
    """The router's way out: the overlay's sockets and the local endpoint.

    With a state directory, rank 0 acknowledges only what is on disk: a message
    leaving the broker waits, in order, until the store's write-out it may depend
    on (`needed()`: the one that will carry what is in memory now) is synced
    (`synced`).  Holding one asks the store for that sync (`demand`: the store
    syncs only when something waits); each sync releases every message it
    covers."""

    __slots__ = ("b", "store", "held")

    def __init__(self, broker):
        self.b = broker            # the Broker: its overlay and local endpoint, once made
        self.store = None          # a durable kvs_store.Store, once one is in use
        self.held: collections.deque = collections.deque()   # (write-out, send, args)

    def hold_until_durable(self, store) -> None:
        self.store = store
        store.on_durable.append(self._release)

    def _hold(self, send, *args) -> bool:
        """Whether the message must wait (it is then kept to be sent in order)."""
        store = self.store
        if store is None:
            return False
        need = store.needed()
        if need <= store.synced and not self.held:
            return False
        if need > store.synced:
            store.demand(need)
        self.held.append((need, send, args))
        return True

    def _release(self) -> None:
        held, synced = self.held, self.store.synced
        while held and held[0][0] <= synced:
            _, send, args = held.popleft()
            send(*args)

    def parent_connected(self) -> bool:
        return self.b.overlay is not None and self.b.overlay.parent_connected()

    def send_parent(self, frames: list[bytes]) -> None:
        if not self._hold(self._send_parent, frames):
            self._send_parent(frames)

    def _send_parent(self, frames: list[bytes]) -> None:
        self.b.overlay.send_parent(frames)

    def child_state(self, rank: int) -> str:
        return self.b.overlay.child_state(rank) if self.b.overlay is not None else "offline"

    def send_child(self, rank: int, frames: list[bytes]) -> bool:
        return self._hold(self._send_child, rank, frames) or self._send_child(rank, frames)

    def _send_child(self, rank: int, frames: list[bytes]) -> bool:
        return self.b.overlay is not None and self.b.overlay.send_child(rank, frames)

    def send_children(self, frames: list[bytes]) -> None:
        if not self._hold(self._send_children, frames):
            self._send_children(frames)

    def _send_children(self, frames: list[bytes]) -> None:
        if self.b.overlay is not None:
            self.b.overlay.send_children(frames)

    def send_client(self, ident: bytes, frames: list[bytes]) -> bool:
        return self._hold(self._send_client, ident, frames) or self._send_client(ident, frames)

    def _send_client(self, ident: bytes, frames: list[bytes]) -> bool:
        return self.b.local is not None and self.b.local.send(ident, frames)
