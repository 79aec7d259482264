"""Admission of connections to a listening ZeroMQ socket: descriptors are bounded.

libzmq accepts every connection its listener sees, and a peer that connects and
never speaks (no key needed on TCP, any owner process on ipc) holds one of the
broker's descriptors for as long as it likes.  At the descriptor limit libzmq's
ipc listener aborts the process, so a broker must never get there.  The guard
watches a socket's monitor (an accepted connection's event carries its
descriptor) and the descriptor each message arrives on (ZMQ_SRCFD):

- a connection that has not yet sent a message is *pending*; at most
  `per_address` pending connections from one address and `pending` in all are
  kept, and past either bound the oldest pending one is closed;
- a connection accepted on a descriptor at or above `limit - reserve` is closed
  at once: descriptors are allocated lowest first, so such a number means the
  table is that full, and the reserve is kept for the connections the broker
  already serves (and its own files, pipes and job shells).

A connection is closed with shutdown(2) on its descriptor, never close(2): libzmq
owns the descriptor, sees the connection end and closes it itself.  Before the
shutdown the descriptor's inode is checked against the one recorded at accept,
so a descriptor libzmq has closed and reused meanwhile is never touched.
"""

from __future__ import annotations

import os
import socket
import time
from collections import OrderedDict
from collections.abc import Callable

from ..util.log import get_logger

log = get_logger("admission")

# repeated refusals are logged at most this often (seconds)
_LOG_EVERY = 10.0


def raise_nofile_limit() -> int:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit; returns the soft
    limit now in force."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    elif hard == resource.RLIM_INFINITY and soft != resource.RLIM_INFINITY:
        # the kernel caps descriptors at fs.nr_open whatever the hard limit says
        try:
            with open("/proc/sys/fs/nr_open") as f:
                cap = int(f.read())
            resource.setrlimit(resource.RLIMIT_NOFILE, (cap, hard))
            soft = cap
        except (ValueError, OSError):
            pass
    return soft


def nofile_limit() -> int:
    import resource
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def default_reserve(limit: int) -> int:
    """Descriptors kept back from connections: an eighth of the limit, 64 to 4096."""
    return max(64, min(4096, limit // 8))


class ConnectionGuard:
    """Bounds on one listening socket's connections (see the module docstring)."""

    def __init__(self, what: str, *, pending: int, per_address: int | None = None,
                 limit: int | None = None, reserve: int | None = None,
                 address_of: Callable[[int], str | None] | None = None):
        self.what = what                      # names the socket in the log
        self.max_pending = pending
        self.per_address = per_address
        self.limit = limit            # None: this process's RLIMIT_NOFILE, read at each accept
        self.reserve = reserve        # None: default_reserve(limit)
        self.address_of = address_of          # fd -> peer address (TCP), for per_address
        # fd -> (inode, address): connections that have not spoken, oldest first
        self.pending: OrderedDict[int, tuple[int, str | None]] = OrderedDict()
        self.by_address: dict[str | None, int] = {}
        self.shut: set[int] = set()           # descriptors shut down, not yet reported closed
        self.closed_pending = 0               # closed for exceeding a bound
        self.refused = 0                      # closed at once: descriptors near the limit
        self._last_log = 0.0

    # ----------------------------------------------------------- events
    def accepted(self, fd: int) -> None:
        """libzmq accepted a connection on descriptor `fd`."""
        try:
            ino = os.fstat(fd).st_ino
        except OSError:
            return          # already closed again
        limit = self.limit if self.limit is not None else nofile_limit()
        reserve = self.reserve if self.reserve is not None else default_reserve(limit)
        if fd >= limit - reserve:
            self.refused += 1
            self._shutdown(fd, ino)
            self._warn("connection refused: descriptors near the limit",
                       fd=fd, limit=limit, reserve=reserve, refused=self.refused)
            return
        self.forget(fd)     # a reused number: the old connection's end was missed
        address = self.address_of(fd) if self.address_of and self.per_address else None
        self.pending[fd] = (ino, address)
        if self.per_address:
            n = self.by_address.get(address, 0) + 1
            self.by_address[address] = n
            if n > self.per_address:
                self._close_oldest(address)
        while len(self.pending) > self.max_pending:
            self._close_oldest(None)

    def spoke(self, fd: int) -> None:
        """A message arrived on `fd`: the connection is no longer pending."""
        if fd in self.pending:
            self.forget(fd)

    def closed(self, fd: int) -> bool:
        """The connection on `fd` closed; True if the guard closed it."""
        self.forget(fd)
        if fd in self.shut:
            self.shut.discard(fd)
            return True
        return False

    def forget(self, fd: int) -> None:
        """The connection on `fd` is no longer pending (it spoke, or closed)."""
        entry = self.pending.pop(fd, None)
        if entry is not None and self.per_address:
            address = entry[1]
            n = self.by_address.get(address, 0) - 1
            if n > 0:
                self.by_address[address] = n
            else:
                self.by_address.pop(address, None)

    # ---------------------------------------------------------- closing
    def _close_oldest(self, address: str | None) -> None:
        fd = next((f for f, (_, a) in self.pending.items()
                   if address is None or a == address), None)
        if fd is None:
            return
        ino, addr = self.pending[fd]
        self.forget(fd)
        self.closed_pending += 1
        self._shutdown(fd, ino)
        self._warn("closing connections that do not speak", limit=self.max_pending,
                   per_address=self.per_address, address=addr, closed=self.closed_pending)

    def _shutdown(self, fd: int, ino: int) -> None:
        try:
            if os.fstat(fd).st_ino != ino:
                return      # closed by libzmq and the number reused: not ours to touch
            s = socket.socket(fileno=fd)
        except OSError:
            return
        try:
            s.shutdown(socket.SHUT_RDWR)
            self.shut.add(fd)
        except OSError:
            pass
        finally:
            s.detach()      # libzmq owns the descriptor and closes it

    def _warn(self, text: str, **fields) -> None:
        now = time.monotonic()
        if now - self._last_log >= _LOG_EVERY:
            self._last_log = now
            log.warning(text, socket=self.what, **fields)
