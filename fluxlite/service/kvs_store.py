"""Where the KVS keeps large values: an SQLite file in the run directory.

Job output (and any other long eventlog) would otherwise sit in rank 0's heap
for as long as the job is remembered.  The KVS moves an appended list here once
it is long or an append brings a lot of data (`Store.spill`); the tree then
holds a small `Log` node (an id and a length) in its place.  Clients never see
the difference: `kvs.get` and `kvs.watch` read the entries back from here.

The file is `<rundir>/content.sqlite`, owner-only (mode 0600, never a symlink),
with no journal file and no fsync: it lives and dies with the instance (it is
removed when the KVS stops, even from a run directory kept with --rundir).
Each KVS commit is one SQLite transaction, so a commit that fails half way
leaves neither the tree nor the file changed.
"""

from __future__ import annotations

import os
import sqlite3

from ..protocol.message import pack, unpack

SPILL_ENTRIES = 64          # a list longer than this lives on disk
SPILL_BYTES = 4096          # so does one an append brings more than this to
READ_BATCH = 1024           # entries per read (and per watch response)

FILENAME = "content.sqlite"


class Log:
    """A list kept in the store: its id there and how many entries it has."""
    __slots__ = ("id", "n")

    def __init__(self, id: int, n: int = 0):
        self.id = id
        self.n = n


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
        self.db.execute("PRAGMA journal_mode=MEMORY")
        self.db.execute("PRAGMA synchronous=OFF")
        self.db.execute("PRAGMA temp_store=MEMORY")
        self.db.execute("CREATE TABLE IF NOT EXISTS entries (log INTEGER, seq INTEGER, "
                        "data BLOB, PRIMARY KEY (log, seq)) WITHOUT ROWID")
        self.next_id = 1
        self.in_tx = False
        self.nbytes = 0

    # ------------------------------------------------------------ policy
    @staticmethod
    def spill(length: int, batch: list) -> bool:
        """Whether a list of `length` entries, the last of them `batch`, goes to disk."""
        if length > SPILL_ENTRIES:
            return True
        return sum(len(pack(e)) for e in batch) > SPILL_BYTES

    # ------------------------------------------------------ transactions
    def _begin(self) -> None:
        if not self.in_tx:
            self.db.execute("BEGIN")
            self.in_tx = True

    def finish(self, ok: bool) -> None:
        """End the commit's transaction (if it wrote anything): keep it or undo it."""
        if self.in_tx:
            self.in_tx = False
            self.db.execute("COMMIT" if ok else "ROLLBACK")

    # ------------------------------------------------------------ values
    def new_log(self) -> Log:
        log = Log(self.next_id)
        self.next_id += 1
        return log

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

    def drop(self, logs: list[Log]) -> None:
        """Forget logs that are no longer in the tree (unlinked or overwritten)."""
        if not logs:
            return
        self._begin()
        self.db.executemany("DELETE FROM entries WHERE log = ?", [(lg.id,) for lg in logs])

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
