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
Each KVS commit is one SQLite transaction, so a commit that fails half way
leaves neither the tree nor the file changed.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import zlib

from ..protocol.message import pack, unpack

READ_BATCH = 1024           # entries per read (and per watch response)
CACHE_KIB = 512             # SQLite page cache (its default is 2 MB, all of it in the heap)

FILENAME = "content.sqlite"


class Log:
    """A list kept in the store: its id there and how many entries it has."""
    __slots__ = ("id", "n")

    def __init__(self, id: int, n: int = 0):
        self.id = id
        self.n = n


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
    def __init__(self, rundir: str | None):
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
        self.open = False    # an SQLite transaction is open (see _begin)
        self.flush_later = False   # the event loop's next turn ends it (else finish does)
        self.in_tx = False   # a KVS commit is under way in it
        self.nbytes = 0

    # ------------------------------------------------------ transactions
    # A KVS commit is a savepoint inside one SQLite transaction that stays open until
    # the event loop's next turn (`flush`): a job's dozen eventlog appends then cost a
    # savepoint each (~7 us) rather than a transaction each (~30 us, written out).
    def _begin(self) -> None:
        if self.in_tx:
            return
        if not self.open:
            self.db.execute("BEGIN")
            self.open = True
            try:
                asyncio.get_running_loop().call_soon(self.flush)
                self.flush_later = True
            except RuntimeError:   # no event loop (a KVS driven directly): at finish
                self.flush_later = False
        self.db.execute("SAVEPOINT kvs")
        self.in_tx = True

    def finish(self, ok: bool) -> None:
        """End the commit's savepoint (if it wrote anything): keep it or undo it."""
        if not self.in_tx:
            return
        self.in_tx = False
        if not ok:
            self.db.execute("ROLLBACK TO kvs")
        self.db.execute("RELEASE kvs")
        if not self.flush_later:
            self.flush()

    def flush(self) -> None:
        """Write out what the commits since the last flush changed."""
        if self.open and not self.in_tx:
            self.open = False
            self.db.execute("COMMIT")

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
        self.nbytes += len(data)
        self.db.execute("INSERT INTO entries VALUES (?, 0, ?)", (blob.id, data))
        return blob

    def get(self, blob: Blob):
        """The map a Blob names (a fresh copy for each reader)."""
        row = self.db.execute("SELECT data FROM entries WHERE log = ? AND seq = 0",
                              (blob.id,)).fetchone()
        return unpack(zlib.decompress(row[0]))

    def append(self, log: Log, entries: list) -> None:
        self._begin()
        rows = []
        for i, e in enumerate(entries, start=log.n):
            data = pack(e)
            self.nbytes += len(data)
            rows.append((log.id, i, data))
        self.db.executemany("INSERT INTO entries VALUES (?, ?, ?)", rows)
        log.n += len(entries)

    def read(self, log: Log, start: int = 0, limit: int | None = None) -> list:
        """Entries start.. of a log (at most `limit`)."""
        stop = log.n if limit is None else min(log.n, start + limit)
        cur = self.db.execute("SELECT data FROM entries WHERE log = ? AND seq >= ? AND seq < ? "
                              "ORDER BY seq", (log.id, start, stop))
        return [unpack(row[0]) for row in cur]

    def drop(self, nodes: list[Log | Blob]) -> None:
        """Forget logs and blobs that are no longer in the tree (unlinked or
        overwritten)."""
        if not nodes:
            return
        self._begin()
        self.db.executemany("DELETE FROM entries WHERE log = ?", [(n.id,) for n in nodes])

    def count(self) -> int:
        return self.db.execute("SELECT count(*) FROM entries").fetchone()[0]

    def close(self) -> None:
        """Close and remove the file: nothing in it outlives the instance (a run
        directory kept with --rundir keeps its logs, not job data)."""
        self.db.close()
        if self.path != ":memory:":
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
