"""The state directory: where an instance's KVS outlives its brokers.

`-Sstatedir=DIR` (Flux's attribute) keeps the KVS in DIR/content.sqlite;
`-Scontent.backing-path=FILE` names the database file itself.  Rank 0's KVS
opens it (kvs_store.Store, durable), and the job-manager, the queue and the
drain state are rebuilt from what it holds at the next start.

This module owns what is checked before anything is trusted to the file:
  - one instance at a time: an exclusive lock (flock on FILE.lock, which names
    the broker holding it) for as long as rank 0 runs;
  - the file is fluxlite's (SQLite's application_id), of a format this
    version reads (user_version), and whole (PRAGMA quick_check).  A database
    that fails is refused with one line saying what is wrong, where, and how to
    start fresh; nothing is half restored.
`fluxlite start` runs the same checks (`preflight`) before it forks a broker,
so a refusal is one line on its stderr and exit 1.

Beside the KVS's tables (kvs_store.py) the file has one of its own,
`summaries`: the job-manager's entry of each inactive job (jm_restart.py),
which kvs_store writes out in the same transaction as the KVS changes of the
loop turn that made it.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3

from ..errors import UsageError

FILENAME = "content.sqlite"
APPLICATION_ID = 0x464C5854      # "FLXT"
FORMAT = 1                       # user_version of the tables kvs_store.py writes


def db_path(attrs: dict) -> str | None:
    """The database an instance's attributes name, or None (no state kept)."""
    backing = attrs.get("content.backing-path") or ""
    if backing:
        return os.path.abspath(backing)
    statedir = attrs.get("statedir") or ""
    return os.path.join(os.path.abspath(statedir), FILENAME) if statedir else None


def _fresh(path: str) -> str:
    return (f"move it away (or name another statedir) to start an instance with no "
            f"history: mv {path} {path}.old")


def lock(path: str) -> int:
    """Take the state database's lock for this process; an fd to keep open while
    the database is in use.  Refused, with the holder's pid, if another instance
    holds it."""
    fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:     # EWOULDBLOCK: another process holds the lock
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise UsageError(f"state database {path} is in use by another instance "
                         f"(broker pid {holder}): stop that instance first, or start "
                         "with another statedir") from None
    except OSError:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def check(db: sqlite3.Connection, path: str, *, full: bool = True) -> None:
    """Refuse a database that is not fluxlite's, of a newer format, or damaged; mark
    an empty one as ours."""
    try:
        app = db.execute("PRAGMA application_id").fetchone()[0]
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if app == 0 and version == 0 and tables == 0:
            db.execute(f"PRAGMA application_id={APPLICATION_ID}")
            db.execute(f"PRAGMA user_version={FORMAT}")
            return
        if app != APPLICATION_ID:
            raise UsageError(f"state database {path} is not a fluxlite state database: "
                             f"{_fresh(path)}")
        if version > FORMAT:
            raise UsageError(f"state database {path} has format {version}, newer than this "
                             f"fluxlite reads ({FORMAT}): use a newer fluxlite, or "
                             f"{_fresh(path)}")
        if full:
            verdict = db.execute("PRAGMA quick_check").fetchone()[0]
            if verdict != "ok":
                raise UsageError(f"state database {path} is damaged ({verdict}): "
                                 f"{_fresh(path)}")
    except sqlite3.DatabaseError as exc:
        raise UsageError(f"state database {path} is damaged ({exc}): {_fresh(path)}") \
            from None


def connect(path: str) -> sqlite3.Connection:
    """Open the database (made owner-only if new), or refuse it in one line."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise UsageError(f"cannot open state database {path}: {exc.strerror}") from None
    os.close(fd)
    try:
        return sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except sqlite3.DatabaseError as exc:
        raise UsageError(f"state database {path} is damaged ({exc}): {_fresh(path)}") \
            from None


def preflight(attrs: dict) -> None:
    """Before an instance starts: its state directory exists (made owner-only if not),
    nobody else uses it, and its database is sound.  One line (UsageError) if not."""
    path = db_path(attrs)
    if path is None:
        return
    parent = os.path.dirname(path)
    if attrs.get("statedir"):
        from ..util.paths import make_private_dirs
        try:
            make_private_dirs(parent)
        except OSError as exc:
            raise UsageError(f"cannot create statedir {parent}: {exc.strerror}") from None
    if not os.path.isdir(parent):
        raise UsageError(f"content.backing-path {path}: directory {parent} does not exist")
    fd = lock(path)
    try:
        db = connect(path)
        try:
            check(db, path)
        finally:
            db.close()
    finally:
        os.close(fd)


def create_summaries(db: sqlite3.Connection) -> None:
    db.execute("CREATE TABLE IF NOT EXISTS summaries (id INTEGER PRIMARY KEY, data BLOB)")


def write_summaries(db: sqlite3.Connection, pending: dict[int, bytes | None]) -> None:
    """Write (or, for None, delete) job summaries, inside the caller's transaction."""
    kept = [(i, d) for i, d in pending.items() if d is not None]
    if kept:
        db.executemany("INSERT OR REPLACE INTO summaries VALUES (?, ?)", kept)
    if len(kept) < len(pending):
        db.executemany("DELETE FROM summaries WHERE id = ?",
                       [(i,) for i, d in pending.items() if d is None])


def summaries(db: sqlite3.Connection):
    """(job id, summary) of every job summary written out, in id order."""
    return db.execute("SELECT id, data FROM summaries ORDER BY id")
