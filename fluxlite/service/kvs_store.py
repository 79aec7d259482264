"""Where the KVS keeps what is not a small scalar: an SQLite file in the run directory.

A job's data would otherwise sit in rank 0's heap for as long as the job is
remembered: its jobspec and R (maps), its eventlogs and output (lists made by
appends).  With thousands of jobs pending at once, the heap would grow by
megabytes, and a Python heap does not shrink back after such a peak (its
arenas stay pinned by whatever outlives the peak).  So the KVS keeps every
map value (`Blob`) and every appended list (`Log`) here from the start; the
tree in the heap holds only directories, small nodes (an id, a length) and
scalars.  Clients never see the difference: `kvs.get` and `kvs.watch` read
the values back from here.

The file is `<rundir>/content.sqlite`, owner-only (mode 0600, never a symlink),
with no journal file and no fsync: it lives and dies with the instance (it is
removed when the KVS stops, even from a run directory kept with --rundir).
What commits add is kept in memory and written out together, in one SQLite
transaction, FLUSH_DELAY after the first of them, or at once when it reaches
FLUSH_BYTES (a job's dozen eventlog appends would otherwise cost a statement and
a savepoint each, and a transaction per loop turn still cost rank 0 a third of
a millisecond per job).  A commit that
fails half way leaves nothing behind: its additions are taken back from that
buffer, and what it removed is removed only once it has succeeded.  If writing
out fails (the disk is full), the buffer is kept and written with the next
write-out, and the error is logged.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import zlib

from ..protocol.message import pack, unpack
from ..util.log import get_logger

log = get_logger("kvs")

READ_BATCH = 1024           # entries per read (and per watch response)
CACHE_KIB = 512             # SQLite page cache (its default is 2 MB, all of it in the heap)
FLUSH_DELAY = 0.05          # seconds additions wait to be written out with later ones
FLUSH_BYTES = 1 << 20       # ... unless they are this many bytes already

FILENAME = "content.sqlite"


class Log:
    """A list kept in the store: its id there, how many entries it has, and the
    last of them while they wait to be written out (`pending`, else None)."""
    __slots__ = ("id", "n", "pending")

    def __init__(self, id: int, n: int = 0):
        self.id = id
        self.n = n
        self.pending: list[bytes] | None = None

    @property
    def written(self) -> int:
        return self.n - len(self.pending) if self.pending else self.n


class Blob:
    """A map kept in the store (encoded and compressed: a jobspec is mostly its
    environment, which compresses well)."""
    __slots__ = ("id",)

    def __init__(self, id: int):
        self.id = id


def _create_private(path: str) -> None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.ftruncate(fd, 0)  # an old file of that name holds nothing of ours
    finally:
        os.close(fd)


class Store:
    def __init__(self, rundir: str | None, flush_delay: float = FLUSH_DELAY):
        if rundir:
            path = os.path.join(rundir, FILENAME)
            _create_private(path)
        else:  # a KVS outside a broker (no run directory): the same code, in memory
            path = ":memory:"
        self.path = path
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        # one connection, this broker's: hold the file lock for good rather than take and
        # release it (and look for a hot journal) around every transaction
        self.db.execute("PRAGMA locking_mode=EXCLUSIVE")
        self.db.execute("PRAGMA journal_mode=MEMORY")
        self.db.execute("PRAGMA synchronous=OFF")
        self.db.execute("PRAGMA temp_store=MEMORY")
        # recent pages are in the kernel's page cache anyway: keep SQLite's own small
        self.db.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        self.db.execute("CREATE TABLE IF NOT EXISTS entries (log INTEGER, seq INTEGER, "
                        "data BLOB, PRIMARY KEY (log, seq)) WITHOUT ROWID")
        self.next_id = 1
        self.flush_delay = flush_delay
        self.pending_bytes = 0               # encoded bytes waiting to be written out
        # what commits added since the last write-out, written out by flush()
        self.logs: list[Log] = []            # logs with pending entries
        self.blobs: dict[int, bytes] = {}    # blob id -> compressed map
        self.deleted: list[int] = []         # ids whose rows go
        self.deleted_rows = 0                # how many rows those are
        self.flush_later: asyncio.Handle | None = None   # the write-out to come
        # the commit under way: how to take back what it added, what it removes
        self.in_tx = False
        self.undo: list[tuple] = []
        self.removals: list[Log | Blob] = []

    # ------------------------------------------------------ commits
    def _begin(self) -> None:
        if self.in_tx:
            return
        self.in_tx = True
        if self.flush_later is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:   # no event loop (a KVS driven directly): at finish
                return
            self.flush_later = (loop.call_later(self.flush_delay, self.flush)
                                if self.flush_delay else loop.call_soon(self.flush))

    def finish(self, ok: bool) -> None:
        """End a KVS commit (if it changed anything here): keep it or take it back."""
        if not self.in_tx:
            return
        self.in_tx = False
        if ok:
            for node in self.removals:
                self._remove(node)
        else:
            for kind, node, *old in reversed(self.undo):
                if kind == "put":
                    self.pending_bytes -= len(self.blobs.pop(node.id, b""))
                else:   # an append: back to its length and pending entries before
                    node.n, kept = old
                    self.pending_bytes -= sum(map(len, node.pending[kept:]))
                    del node.pending[kept:]
        self.undo.clear()
        self.removals.clear()
        if self.flush_later is None or self.pending_bytes >= FLUSH_BYTES:
            self.flush()

    def _remove(self, node: Log | Blob) -> None:
        if isinstance(node, Blob):
            if self.blobs.pop(node.id, None) is None:
                self.deleted.append(node.id)
                self.deleted_rows += 1
        else:
            if node.written:
                self.deleted.append(node.id)
                self.deleted_rows += node.written
            node.pending = None

    def flush(self) -> None:
        """Write out what the commits since the last flush changed."""
        if self.flush_later is not None:
            self.flush_later.cancel()
            self.flush_later = None
        if self.in_tx or not (self.logs or self.blobs or self.deleted):
            return
        rows = [(lg.id, seq, data) for lg in self.logs if lg.pending
                for seq, data in enumerate(lg.pending, start=lg.written)]
        rows += [(bid, 0, data) for bid, data in self.blobs.items()]
        try:
            self.db.execute("BEGIN")
            if rows:
                self.db.executemany("INSERT INTO entries VALUES (?, ?, ?)", rows)
            if self.deleted:
                self.db.executemany("DELETE FROM entries WHERE log = ?",
                                    [(i,) for i in self.deleted])
            self.db.execute("COMMIT")
        except sqlite3.Error as exc:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            log.error("job store: writing out failed; kept in memory until the next "
                      "commit", error=str(exc), path=self.path)
            return
        for lg in self.logs:
            lg.pending = None
        self.logs.clear()
        self.blobs.clear()
        self.deleted.clear()
        self.deleted_rows = 0
        self.pending_bytes = 0

    # ------------------------------------------------------------ values
    def _new_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def new_log(self) -> Log:
        return Log(self._new_id())

    def put(self, value) -> Blob:
        """Keep one map; the Blob names it."""
        self._begin()
        blob = Blob(self._new_id())
        data = zlib.compress(pack(value), 1)
        self.pending_bytes += len(data)
        self.blobs[blob.id] = data
        self.undo.append(("put", blob))
        return blob

    def get(self, blob: Blob):
        """The map a Blob names (a fresh copy for each reader)."""
        data = self.blobs.get(blob.id)
        if data is None:
            data = self.db.execute("SELECT data FROM entries WHERE log = ? AND seq = 0",
                                   (blob.id,)).fetchone()[0]
        return unpack(zlib.decompress(data))

    def append(self, lg: Log, entries: list) -> None:
        self._begin()
        if lg.pending is None:
            lg.pending = []
            self.logs.append(lg)
        self.undo.append(("append", lg, lg.n, len(lg.pending)))
        for e in entries:
            data = pack(e)
            self.pending_bytes += len(data)
            lg.pending.append(data)
        lg.n += len(entries)

    def read(self, lg: Log, start: int = 0, limit: int | None = None) -> list:
        """Entries start.. of a log (at most `limit`)."""
        stop = lg.n if limit is None else min(lg.n, start + limit)
        written = lg.written
        out = []
        if start < written:
            cur = self.db.execute("SELECT data FROM entries WHERE log = ? AND seq >= ? "
                                  "AND seq < ? ORDER BY seq",
                                  (lg.id, start, min(stop, written)))
            out = [unpack(row[0]) for row in cur]
        if stop > written:
            out += [unpack(d) for d in lg.pending[max(start, written) - written:stop - written]]
        return out

    def drop(self, nodes: list[Log | Blob]) -> None:
        """Forget logs and blobs that are no longer in the tree (unlinked or
        overwritten), once the commit that does so succeeds."""
        if nodes:
            self._begin()
            self.removals.extend(nodes)

    def count(self) -> int:
        """Entries kept (a map counts one), written out or not, less those removed
        whose rows are still on disk."""
        written = self.db.execute("SELECT count(*) FROM entries").fetchone()[0]
        written -= self.deleted_rows
        return written + len(self.blobs) + sum(len(lg.pending or ()) for lg in self.logs)

    def close(self) -> None:
        """Close and remove the file: nothing in it outlives the instance (a run
        directory kept with --rundir keeps its logs, not job data)."""
        if self.flush_later is not None:
            self.flush_later.cancel()
            self.flush_later = None
        self.db.close()
        if self.path != ":memory:":
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
