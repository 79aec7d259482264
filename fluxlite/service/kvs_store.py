"""Where the KVS keeps what is not a small scalar: an SQLite file in the run directory.

A job's data would otherwise sit in rank 0's heap as long as the job is
remembered (its jobspec and R, its eventlogs and output), and a Python heap
does not shrink back after a peak of thousands of pending jobs.  So the KVS
keeps every map value (`Blob`) and every appended list (`Log`) here from the
start; the tree in the heap holds only directories, small nodes (an id, a
length) and scalars.  Clients never see the difference: `kvs.lookup` and
`kvs-watch.lookup` read the values back from here.

The file is `<rundir>/content.sqlite`, owner-only (mode 0600, never a
symlink), with no journal file and no fsync: it lives and dies with the
instance.  What commits add is kept in memory and written out together, in
one SQLite transaction, FLUSH_DELAY after the first of them, or at once at
FLUSH_BYTES (a statement per eventlog append cost rank 0 a third of a
millisecond per job).  A commit that fails half way leaves nothing behind:
its additions are taken back from that buffer, and what it removed is removed
only once it has succeeded.  If writing out fails (the disk is full), the
buffer is kept and tried again RETRY_DELAY later; one line is logged when
writing starts failing and one when it works again.  Past HELD_MAX bytes held
so, `check_room` refuses new client commits with ENOSPC, while everything
already acknowledged stays held until it can be written.

A durable store (`-Sstatedir=DIR`, see statedir.py) keeps the whole tree: its
database outlives the instance and a restart loads it back (`load`).  Each
key's node is a row of `nodes` (a scalar with its value, a map or list by its
id in `entries`; directories are implied by the keys below them), written
beside the entries in the same transaction, with the job-manager's summaries
of inactive jobs (`keep_summary`, jm_restart.py).  Writing out happens at the
end of the loop turn that changed anything: one transaction into the WAL
(write-out number `committed`).  It is on disk once the WAL file is synced
(fdatasync, as SQLite syncs its own WAL), and that happens only when something
waits for it: the broker holds back every message it sends until the
write-out it may depend on is synced (`needed()`, `synced`), and a message held
so asks for that sync (`demand`); answers to job shells do not wait, but their
tasks wait for their job's alloc (broker/links.py).  A thread syncs (`_Syncer`) while the loop
goes on: rank 0 never waits for the disk.  What the turns bring while a sync
runs is written out in one transaction when it ends, and synced next if
something waits for it (group commit); turns that answer nobody cost no sync.
`on_durable` callbacks run as `synced` grows.  A failed write-out or sync is
tried again RETRY_DELAY later, and nothing waiting on it is acknowledged
meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable

from ..protocol.message import pack, unpack
from ..util.log import get_logger
from . import statedir

log = get_logger("kvs")

READ_BATCH = 1024           # entries per read (and per watch response)
CACHE_KIB = 512             # SQLite page cache (its default is 2 MB, all of it in the heap)
FLUSH_DELAY = 0.05          # seconds additions wait to be written out with later ones
FLUSH_BYTES = 1 << 20       # ... unless they are this many bytes already
RETRY_DELAY = 1.0           # seconds before a failed write-out is tried again
HELD_MAX = 64 << 20         # bytes held while writing out fails, past which commits are refused

FILENAME = "content.sqlite"
SCALAR, BLOB, LOG, DIR, LINK = 0, 1, 2, 3, 4   # what a row of `nodes` holds (DIR: an empty
                                              # one made; LINK: a symbolic link)
UNLINK = object()             # a tree change that removes a key and everything below it
MKDIR = object()              # a tree change that makes an empty directory (kvs mkdir)
VERSION_KEY = "\0version"     # the row of `nodes` that holds the KVS version (no key's name)


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


class Symlink:
    """A key that stands for another (Flux's symlink): `target`, in `namespace`
    (None: the link's own), held in the tree like a scalar."""
    __slots__ = ("target", "namespace")

    def __init__(self, target: str, namespace: str | None = None):
        self.target, self.namespace = target, namespace


class Blob:
    """A map kept in the store (encoded and compressed: a jobspec is mostly its
    environment, which compresses well)."""
    __slots__ = ("id",)

    def __init__(self, id: int):
        self.id = id


class _Syncer:
    """A thread that syncs one file each time it is asked (a byte on a pipe) and
    says how that went on another pipe, which the loop watches: the loop never
    waits for the disk, and the two threads share nothing but those bytes (an
    executor's futures and call_soon_threadsafe cost rank 0 several times as
    much, most of it the GIL passing back and forth)."""

    def __init__(self, fd: int, loop: asyncio.AbstractEventLoop, done: Callable):
        self.fd, self.loop, self.done = fd, loop, done
        self.ask_r, self.ask_w = os.pipe2(os.O_CLOEXEC)
        self.tell_r, self.tell_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        loop.add_reader(self.tell_r, self._told)
        self.thread = threading.Thread(target=self._run, name="statedir-sync", daemon=True)
        self.thread.start()

    def request(self) -> None:
        os.write(self.ask_w, b"s")

    def _run(self) -> None:
        while os.read(self.ask_r, 1):
            try:
                os.fdatasync(self.fd)
                os.write(self.tell_w, b"k")
            except OSError as exc:
                os.write(self.tell_w, b"e" + str(exc).encode()[:200])

    def _told(self) -> None:
        try:
            data = os.read(self.tell_r, 512)
        except BlockingIOError:
            return
        if data:
            self.done(None if data[:1] == b"k" else data[1:].decode(errors="replace"))

    def close(self) -> None:
        if not self.loop.is_closed():
            self.loop.remove_reader(self.tell_r)
        os.close(self.ask_w)          # the thread's read ends: it returns
        self.thread.join(10)
        for fd in (self.ask_r, self.tell_r, self.tell_w):
            os.close(fd)


def _create_private(path: str) -> None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.ftruncate(fd, 0)  # an old file of that name holds nothing of ours
    finally:
        os.close(fd)


class Store:
    def __init__(self, rundir: str | None, flush_delay: float = FLUSH_DELAY, *,
                 durable_path: str | None = None):
        self.durable = durable_path is not None
        self.lock_fd: int | None = None
        if self.durable:
            path = durable_path
            self.lock_fd = statedir.lock(path)
            self.db = statedir.connect(path)
            statedir.check(self.db, path)
        else:
            if rundir:
                path = os.path.join(rundir, FILENAME)
                _create_private(path)
            else:  # a KVS outside a broker (no run directory): the same code, in memory
                path = ":memory:"
            self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.path = path
        # one connection, this broker's: hold the file lock for good rather than take and
        # release it (and look for a hot journal) around every transaction.  A durable
        # store's WAL is synced by _sync, off the loop, when something waits for it
        # (SQLite syncs around its own checkpoints).
        # Recent pages are in the kernel's page cache anyway: keep SQLite's own small.
        journal, sync = ("WAL", "NORMAL") if self.durable else ("MEMORY", "OFF")
        for pragma in ("locking_mode=EXCLUSIVE", f"journal_mode={journal}",
                       f"synchronous={sync}", "temp_store=MEMORY", f"cache_size=-{CACHE_KIB}"):
            self.db.execute(f"PRAGMA {pragma}")
        self.db.execute("CREATE TABLE IF NOT EXISTS entries (log INTEGER, seq INTEGER, "
                        "data BLOB, PRIMARY KEY (log, seq)) WITHOUT ROWID")
        self.next_id = 1
        if self.durable:
            self.db.execute("CREATE TABLE IF NOT EXISTS nodes (key TEXT PRIMARY KEY, "
                            "kind INTEGER, ref INTEGER, data BLOB) WITHOUT ROWID")
            statedir.create_summaries(self.db)
            top = self.db.execute("SELECT max(log) FROM entries").fetchone()[0]
            self.next_id = (top or 0) + 1
            flush_delay = 0.0
        self.tree_ops: list[tuple[str, object]] = []   # (key, node or _UNLINK), in order
        self.version = 0                                # the KVS version written out
        self.on_durable: list[Callable[[], None]] = []
        self.committed = 0          # write-outs in the WAL
        self.synced = 0             # of those, the ones known on disk
        self.written = 0            # the KVS version the last write-out holds
        self.checkpoint: tuple[int, float] | None = None  # (version, when) last on disk
        self.wanted = 0             # the last write-out something waits for (demand)
        self.syncing = None         # (write-out, version) a sync under way covers
        self.syncer: _Syncer | None = None
        self.closed = False
        self.wal_fd: int | None = None
        self.flush_delay = flush_delay
        self.pending_bytes = 0               # encoded bytes waiting to be written out
        # what commits added since the last write-out, written out by flush()
        self.logs: list[Log] = []            # logs with pending entries
        self.blobs: dict[int, bytes] = {}    # blob id -> compressed map
        self.deleted: list[int] = []         # ids whose rows go
        self.deleted_rows = 0                # how many rows those are
        self.summaries_out: dict[int, bytes | None] = {}   # keep_summary's, to write
        self.flush_later: asyncio.Handle | None = None   # the write-out to come
        self.failing: str | None = None      # why writing out fails, while it does
        # the commit under way: how to take back what it added, what it removes
        self.in_tx = False
        self.undo: list[tuple] = []
        self.removals: list[Log | Blob] = []

    # ------------------------------------------------------ commits
    def _begin(self) -> None:
        if not self.in_tx:
            self.in_tx = True
            self._flush_soon()

    def _flush_soon(self) -> None:
        if self.flush_later is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:   # no event loop (a KVS driven directly): at finish
                return
            self.flush_later = (loop.call_later(self.flush_delay, self.flush)
                                if self.flush_delay else loop.call_soon(self.flush))

    def finish(self, ok: bool, changes: list | None = None, version: int = 0) -> None:
        """End a KVS commit (if it changed anything here): keep it or take it back.
        A durable store also keeps `changes`, the commit's tree changes in order
        ((key, node), or (key, UNLINK)), and the KVS version it makes."""
        if ok and self.durable and changes:
            self.tree_ops.extend(changes)
            self.version = version
            self._begin()
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
        if self.failing is not None:
            if self.flush_later is None:
                self._retry()       # while writing out fails: on the retry's schedule
        elif self.flush_later is None or self.pending_bytes >= FLUSH_BYTES:
            self.flush()

    def check_room(self) -> None:
        """Refuse a client's commit while writing out fails and HELD_MAX bytes are
        held already (what was acknowledged stays held)."""
        if self.failing is not None and self.pending_bytes >= HELD_MAX:
            from ..errors import NoSpace
            raise NoSpace(f"the KVS cannot write to {self.path} ({self.failing}) and "
                          f"holds {self.pending_bytes >> 20} MiB already: commit "
                          "refused until it can")

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

    @property
    def dirty(self) -> bool:
        """Whether a change is not on disk yet (a durable store's acknowledgements wait)."""
        return self.needed() > self.synced

    def needed(self) -> int:
        """The write-out that what is known now will be on disk with: the next one while
        a change waits in memory, else the last one made."""
        return self.committed + bool(self.in_tx or self.logs or self.blobs or self.deleted
                                     or self.tree_ops)

    def demand(self, need: int) -> None:
        """Something waits for write-out `need` to be on disk (the broker holds a
        message back): sync once this turn's write-out is made."""
        if need <= self.wanted:
            return
        self.wanted = need
        if self.flush_later is None and self.syncing is None:
            try:
                self.flush_later = asyncio.get_running_loop().call_soon(self.flush)
            except RuntimeError:   # no event loop (a store driven directly): now
                self.flush()
        # (a sync under way is followed by one for it: _after_sync)

    def _sync(self) -> None:
        """Sync the write-ahead log if something waits for a write-out not on disk yet
        (every write-out made so far is then durable): in the syncer thread while
        a loop runs, one sync at a time."""
        if self.wanted <= self.synced or self.committed == self.synced \
                or self.syncing is not None or self.closed:
            return
        if self.wal_fd is None:
            self.wal_fd = os.open(self.path + "-wal", os.O_RDONLY | os.O_CLOEXEC)
        target = (self.committed, self.written)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:   # no event loop (a store driven directly): here and now
            os.fdatasync(self.wal_fd)
            self._synced_to(*target)
            return
        if self.syncer is None:
            self.syncer = _Syncer(self.wal_fd, loop, self._after_sync)
        self.syncing = target
        self.syncer.request()

    def _after_sync(self, error: str | None) -> None:
        target, self.syncing = self.syncing, None
        if self.closed:
            return
        if error is not None:
            log.error("state database: syncing to disk failed; tried again shortly",
                      error=error, path=self.path)
            if self.flush_later is None:
                self._retry()
            return
        self._synced_to(*target)
        self.flush()   # what came during the sync: written out, and synced if waited for

    def _synced_to(self, target: int, version: int) -> None:
        self.synced = target
        self.checkpoint = (version, time.time())
        for callback in self.on_durable:
            callback()

    def _tree_rows(self) -> None:
        """Write a durable store's tree changes, in the order they were made (the rows
        between two unlinks in one statement)."""
        rows: list[tuple] = []
        put = "INSERT OR REPLACE INTO nodes VALUES (?, ?, ?, ?)"
        for key, node in self.tree_ops:
            if node is UNLINK:
                if rows:
                    self.db.executemany(put, rows)
                    rows = []
                self.db.execute("DELETE FROM nodes WHERE key = ? OR (key > ? AND key < ?)",
                                (key, key + ".", key + "/"))   # "/" follows "." in bytes
            elif node is MKDIR:
                rows.append((key, DIR, None, None))
            elif isinstance(node, Blob):
                rows.append((key, BLOB, node.id, None))
            elif isinstance(node, Log):
                rows.append((key, LOG, node.id, None))
            elif isinstance(node, Symlink):
                rows.append((key, LINK, None, pack([node.target, node.namespace])))
            else:
                rows.append((key, SCALAR, None, pack(node)))
        rows.append((VERSION_KEY, SCALAR, None, pack(self.version)))
        self.db.executemany(put, rows)

    def flush(self) -> None:
        """Write out what the commits since the last flush changed; a durable store
        then syncs, if something waits for it (`demand`).  While a sync runs, a
        durable store waits for it (its end writes out what came meanwhile): so
        each transaction and each sync carry as many loop turns as the disk takes
        to sync one."""
        if self.flush_later is not None:
            self.flush_later.cancel()
            self.flush_later = None
        if self.syncing is not None:
            return
        self._write_out()
        if self.durable:
            self._sync()

    def _write_out(self) -> None:
        if self.in_tx or not (self.logs or self.blobs or self.deleted or self.tree_ops
                              or self.summaries_out):
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
            if self.durable:
                self._tree_rows()
                if self.summaries_out:
                    statedir.write_summaries(self.db, self.summaries_out)
            self.db.execute("COMMIT")
        except sqlite3.Error as exc:
            try:
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            if self.failing is None:
                log.error("job store: writing out failed; held in memory and tried again "
                          "until it works", error=str(exc), path=self.path)
            self.failing = str(exc)
            self._retry()
            return
        if self.failing is not None:
            log.warning("job store: writing out works again", path=self.path,
                        was=self.failing)
            self.failing = None
        self.tree_ops.clear()
        self.summaries_out.clear()
        for lg in self.logs:
            lg.pending = None
        self.logs.clear()
        self.blobs.clear()
        self.deleted.clear()
        self.deleted_rows = 0
        self.pending_bytes = 0
        if self.durable:
            self.committed += 1
            self.written = self.version
        else:   # written out is all a store without a state directory does
            for callback in self.on_durable:
                callback()

    def keep_summary(self, jobid: int, data: bytes | None) -> None:
        """A durable store's summary of an inactive job (jm_restart.py; None: forget
        it), written out with the KVS changes of this loop turn."""
        self.summaries_out[jobid] = data
        self._flush_soon()

    def _retry(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self.flush_later = loop.call_later(RETRY_DELAY, self.flush)

    def load(self) -> tuple[list[tuple[str, object]], int]:
        """A durable store's tree as it was last written out: (key, node or value,
        or MKDIR for a directory made empty) in key order, and the KVS version."""
        counts = dict(self.db.execute("SELECT log, count(*) FROM entries GROUP BY log"))
        out: list[tuple[str, object]] = []
        for key, kind, ref, data in self.db.execute("SELECT key, kind, ref, data FROM nodes "
                                                    "ORDER BY key"):
            if key == VERSION_KEY:
                self.version = self.written = unpack(data)
                self.checkpoint = (self.version, os.stat(self.path).st_mtime)
            elif kind == BLOB:
                out.append((key, Blob(ref)))
            elif kind == LOG:
                out.append((key, Log(ref, counts.get(ref, 0))))
            elif kind == DIR:
                out.append((key, MKDIR))
            elif kind == LINK:
                out.append((key, Symlink(*unpack(data))))
            else:
                out.append((key, unpack(data)))
        return out, self.version

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
        directory kept with --rundir keeps its logs, not job data).  A durable
        store writes out what is left, and is kept."""
        if self.durable:
            self._write_out()
        if self.flush_later is not None:
            self.flush_later.cancel()
            self.flush_later = None
        self.closed = True
        if self.syncer is not None:
            self.syncer.close()
            self.syncer = None
        if self.durable:
            with contextlib.suppress(sqlite3.Error):
                self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            if self.wal_fd is not None:
                os.close(self.wal_fd)
                self.wal_fd = None
        self.db.close()
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None
        if self.path != ":memory:" and not self.durable:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
