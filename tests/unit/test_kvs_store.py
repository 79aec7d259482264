"""The KVS's on-disk store under an event loop: what commits add is read back at
once and written out later in one transaction (here, with no delay, at the end of
the turn); a failed commit takes back what it added and keeps what it would have
removed; a failed write stays in memory and goes out with a later one."""

import asyncio

import pytest

from fluxlite.service.kvs_store import FLUSH_BYTES, Store

pytestmark = pytest.mark.timeout(30)


def written(store: Store) -> int:
    return store.db.execute("SELECT count(*) FROM entries").fetchone()[0]


async def next_turn() -> None:
    await asyncio.sleep(0)   # flush was queued with call_soon by the first commit
    await asyncio.sleep(0)


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path), flush_delay=0)
    yield s
    s.close()


async def test_a_turns_commits_read_back_at_once_and_are_written_out_together(store):
    lg = store.new_log()
    store.append(lg, [1, 2])
    store.finish(True)
    blob = store.put({"env": {"A": "1"}})
    store.finish(True)
    assert store.read(lg) == [1, 2] and store.get(blob) == {"env": {"A": "1"}}
    assert written(store) == 0 and store.count() == 3
    await next_turn()
    assert written(store) == 3 and store.count() == 3 and lg.pending is None
    store.append(lg, [3, 4])
    store.finish(True)
    # half on disk, half waiting: every slice reads as one list
    assert store.read(lg) == [1, 2, 3, 4]
    assert store.read(lg, 1, 2) == [2, 3] and store.read(lg, 3) == [4]
    assert store.read(lg, 0, 1) == [1]
    await next_turn()
    assert written(store) == 5 and store.read(lg, 1) == [2, 3, 4]


async def test_a_failed_commit_takes_back_what_it_added_and_keeps_what_it_removed(store):
    lg = store.new_log()
    store.append(lg, [1, 2])
    store.finish(True)
    await next_turn()
    store.append(lg, [3])
    store.finish(True)
    old = store.put({"v": 1})
    store.finish(True)
    # one commit: an append, a new map, the log and the old map dropped; it fails
    store.append(lg, [4, 5])
    new = store.put({"v": 2})
    store.drop([lg, old])
    store.finish(False)
    assert lg.n == 3 and store.read(lg) == [1, 2, 3] and store.get(old) == {"v": 1}
    assert new.id not in store.blobs
    await next_turn()
    assert written(store) == 4 and store.count() == 4
    store.drop([lg, old])   # the same removal, succeeding
    store.finish(True)
    # counted as gone at once, although its rows leave the file only at the turn's end
    assert written(store) == 4 and store.count() == 0
    await next_turn()
    assert written(store) == 0 and store.count() == 0


async def test_a_write_that_fails_is_kept_and_goes_out_on_the_retry(store):
    """While writing out fails, commits are held and do not each retry the whole
    buffer: the retry, RETRY_DELAY later, writes everything once there is room."""
    lg = store.new_log()
    store.db.execute("PRAGMA query_only=ON")   # every write now fails, as on a full disk
    store.append(lg, [1])
    store.finish(True)
    await next_turn()
    assert written(store) == 0 and store.read(lg) == [1] and store.count() == 1
    assert store.failing is not None
    store.db.execute("PRAGMA query_only=OFF")
    store.append(lg, [2])
    store.finish(True)
    await next_turn()
    assert written(store) == 0 and store.read(lg) == [1, 2]    # held for the retry
    retry = store.flush_later
    assert retry is not None and retry.when() > asyncio.get_running_loop().time()
    retry._run()          # the retry, RETRY_DELAY after the failure, runs now
    assert written(store) == 2 and store.read(lg) == [1, 2] and lg.pending is None
    assert store.failing is None


async def test_past_the_bound_held_while_failing_commits_are_refused(store, monkeypatch):
    import errno

    from fluxlite.errors import FluxliteError
    from fluxlite.service import kvs_store
    monkeypatch.setattr(kvs_store, "HELD_MAX", 10)
    lg = store.new_log()
    store.check_room()                         # writing out works: never refused
    store.db.execute("PRAGMA query_only=ON")
    store.append(lg, ["x" * 100])
    store.finish(True)
    await next_turn()
    with pytest.raises(FluxliteError) as e:
        store.check_room()
    assert e.value.errnum == errno.ENOSPC and store.read(lg) == ["x" * 100]


async def test_closing_with_a_write_out_pending_leaves_nothing_to_run(tmp_path):
    """The KVS stops (the instance shuts down) in the turn of its last commit: the
    write-out queued for the next turn must not run on the closed file."""
    errors = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: errors.append(ctx))
    s = Store(str(tmp_path), flush_delay=0)
    s.append(s.new_log(), [1])
    s.finish(True)
    s.close()
    await next_turn()
    assert errors == [] and not (tmp_path / "content.sqlite").exists()


async def test_additions_wait_for_the_delay_unless_they_are_large(tmp_path):
    """Many commits share one write-out FLUSH_DELAY after the first; one that brings
    the waiting bytes to FLUSH_BYTES is written out as it ends."""
    s = Store(str(tmp_path), flush_delay=3600)
    try:
        lg = s.new_log()
        s.append(lg, [1])
        s.finish(True)
        s.append(lg, [2])
        s.finish(True)
        await next_turn()
        assert written(s) == 0 and s.read(lg) == [1, 2] and s.count() == 2
        s.append(lg, ["x" * FLUSH_BYTES])
        s.finish(True)
        assert written(s) == 3 and lg.pending is None and s.flush_later is None
        assert s.read(lg, 2)[0] == "x" * FLUSH_BYTES
    finally:
        s.close()
