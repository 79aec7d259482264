"""A durable KVS store (a state directory) and the broker's hold on what rank 0 sends.

The changes of one loop turn are one SQLite transaction at the end of the turn;
until it is synced the store is `dirty`, and the broker's links keep every
outgoing message that depends on it, in order, sending them once the store
says it is durable.  A message held asks for the sync (`demand`): turns that
nobody waits on are written out but cost no sync, and one sync covers them
all.  The tree is written beside the values and loads back; a second store on
the same file is refused while the first holds it.
"""

import asyncio
import os

import pytest

from fluxlite.broker.links import BrokerLinks
from fluxlite.errors import UsageError
from fluxlite.service import statedir
from fluxlite.service.kvs_store import UNLINK, VERSION_KEY, Blob, Log, Store

pytestmark = pytest.mark.timeout(30)


async def next_turn() -> None:
    await asyncio.sleep(0)
    await asyncio.sleep(0)


async def synced(store: Store) -> None:
    """Until a sync has covered every write-out (asked for, as a held message does)."""
    done = asyncio.Event()
    store.on_durable.append(lambda: done.set() if not store.dirty else None)
    if store.dirty:
        store.demand(store.needed())
        await asyncio.wait_for(done.wait(), 10)


@pytest.fixture
def syncs(monkeypatch):
    """The syncs of the state database's files, counted."""
    calls = []
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name)
        monkeypatch.setattr(os, name, lambda fd, real=real: (calls.append(fd), real(fd))[1])
    return calls


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "content.sqlite")


async def test_one_turn_is_one_write_out_and_then_durable(path):
    store = Store(None, durable_path=path)
    lg = store.new_log()
    store.append(lg, [{"name": "submit"}])
    store.finish(True, [("job.a.eventlog", lg)], 1)
    store.finish(True, [("mykey", 42)], 2)          # a scalar: only the tree changes
    blob = store.put({"A": "1"})
    store.finish(True, [("job.a.jobspec", blob)], 3)
    assert store.dirty and store.needed() == 1 and store.synced == 0
    await synced(store)
    assert store.committed == 1 and store.synced == 1   # one write-out for three commits
    rows = store.db.execute("SELECT key FROM nodes WHERE key != ? ORDER BY key",
                            (VERSION_KEY,)).fetchall()
    assert rows == [("job.a.eventlog",), ("job.a.jobspec",), ("mykey",)]
    store.finish(True, [("job.a", UNLINK)], 4)
    await synced(store)
    assert store.db.execute("SELECT key FROM nodes WHERE key != ?",
                            (VERSION_KEY,)).fetchall() == [("mykey",)]
    store.close()


async def test_the_tree_loads_back_and_the_file_is_kept(path):
    store = Store(None, durable_path=path)
    lg = store.new_log()
    store.append(lg, [1, 2, 3])
    store.finish(True, [("a.log", lg), ("a.value", [1, "x"])], 7)
    await synced(store)
    store.close()
    again = Store(None, durable_path=path)
    nodes, version = again.load()
    assert version == 7
    by_key = dict(nodes)
    assert by_key["a.value"] == [1, "x"]
    assert isinstance(by_key["a.log"], Log) and by_key["a.log"].n == 3
    assert again.read(by_key["a.log"]) == [1, 2, 3]
    assert not isinstance(by_key["a.log"], Blob)
    again.close()


async def test_job_summaries_are_written_with_the_turn_s_changes_and_kept(path):
    store = Store(None, durable_path=path)
    store.keep_summary(7, b"seven")
    store.keep_summary(3, b"three")
    lg = store.new_log()
    store.append(lg, [1])
    store.finish(True, [("a.log", lg)], 1)
    await synced(store)
    assert store.committed == 1       # one write-out: the summaries and the commit
    store.keep_summary(7, None)       # forgotten (the job was purged)
    await synced(store)
    store.close()
    again = Store(None, durable_path=path)
    assert list(statedir.summaries(again.db)) == [(3, b"three")]
    again.close()


def test_a_second_store_on_the_same_file_is_refused(path):
    first = Store(None, durable_path=path)
    try:
        with pytest.raises(UsageError, match="in use by another instance"):
            Store(None, durable_path=path)
    finally:
        first.close()
    Store(None, durable_path=path).close()   # free again once the first is closed


class _Endpoint:
    def __init__(self):
        self.sent = []
        self.to = []

    def send(self, ident, frames):
        self.sent.append(frames)
        self.to.append(ident)
        return True


class _Broker:
    overlay = None

    def __init__(self):
        self.local = _Endpoint()


async def test_nothing_leaves_before_the_turns_write_out(path):
    store = Store(None, durable_path=path)
    broker = _Broker()
    links = BrokerLinks(broker)
    links.hold_until_durable(store)
    assert links.send_client(b"c", [b"before"])      # nothing pending: goes at once
    assert broker.local.sent == [[b"before"]]
    store.finish(True, [("k", 1)], 1)
    assert links.send_client(b"c", [b"ack 1"])
    assert links.send_client(b"c", [b"ack 2"])
    assert broker.local.sent == [[b"before"]]         # held: the change is in memory only
    await next_turn()                                 # written out, maybe not synced yet
    assert store.committed == 1
    if store.synced < 1:
        assert broker.local.sent == [[b"before"]]     # held until the sync covers it
    await synced(store)
    assert broker.local.sent == [[b"before"], [b"ack 1"], [b"ack 2"]]
    store.close()


async def test_turns_nobody_waits_for_cost_no_sync_and_one_sync_covers_them(path, syncs):
    store = Store(None, durable_path=path)
    broker = _Broker()
    links = BrokerLinks(broker)
    links.hold_until_durable(store)
    for version in (1, 2, 3):                         # three turns, nothing sent
        store.finish(True, [(f"k{version}", version)], version)
        await next_turn()
    assert store.committed == 3                       # each turn written out at its end
    assert store.synced == 0 and syncs == []          # ... and none of them synced
    store.finish(True, [("k4", 4)], 4)
    released = asyncio.Event()
    store.on_durable.append(released.set)
    assert links.send_client(b"c", [b"ack 4"])
    assert links.send_client(b"c", [b"ack 4 again"])
    assert broker.local.sent == []                    # held: k4 is in memory only
    await asyncio.wait_for(released.wait(), 10)
    assert len(syncs) == 1                            # one sync for the four write-outs
    assert store.committed == store.synced == 4
    assert broker.local.sent == [[b"ack 4"], [b"ack 4 again"]]
    assert links.send_client(b"c", [b"later"])        # nothing pending: at once, no sync
    assert broker.local.sent[-1] == [b"later"] and len(syncs) == 1
    store.close()


async def test_a_failed_sync_holds_the_answers_until_a_retry_works(path, monkeypatch):
    import fluxlite.service.kvs_store as kvs_store
    monkeypatch.setattr(kvs_store, "RETRY_DELAY", 0.01)
    real, failures = os.fdatasync, [OSError(5, "Input/output error")]
    sent_at_retry = []

    def fdatasync(fd):
        if failures:
            raise failures.pop()
        sent_at_retry.append(list(broker.local.sent))
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    store = Store(None, durable_path=path)
    broker = _Broker()
    links = BrokerLinks(broker)
    links.hold_until_durable(store)
    released = asyncio.Event()
    store.on_durable.append(released.set)
    store.finish(True, [("k", 1)], 1)
    assert links.send_client(b"c", [b"ack"])
    await asyncio.wait_for(released.wait(), 10)       # after the failure, the retry
    assert not failures and store.committed == store.synced == 1
    assert sent_at_retry == [[]]                      # held from the failure to the retry
    assert broker.local.sent == [[b"ack"]]
    store.close()


async def test_answers_to_job_shells_leave_at_once_yet_in_order_for_each_client(path):
    store = Store(None, durable_path=path)
    broker = _Broker()
    links = BrokerLinks(broker)
    links.hold_until_durable(store)
    store.finish(True, [("k", 1)], 1)
    assert links.send_client(b"client", [b"ack"])                 # held: k is in memory
    assert links.send_client(b"shell", [b"told"], instance=True)  # the instance's own: at once
    assert broker.local.sent == [[b"told"]]
    # an answer of the same kind to a client that has one waiting keeps its place
    assert links.send_client(b"client", [b"after ack"], instance=True)
    assert broker.local.sent == [[b"told"]]
    await synced(store)
    assert broker.local.sent == [[b"told"], [b"ack"], [b"after ack"]]
    assert broker.local.to == [b"shell", b"client", b"client"]
    assert not links.held and not links.held_for                  # nothing kept per client
    store.close()


async def test_a_write_out_is_awaited_until_it_is_on_disk(path, syncs):
    store = Store(None, durable_path=path)
    links = BrokerLinks(_Broker())
    links.hold_until_durable(store)
    await links.durable(links.write_out())                        # nothing to write: at once
    assert syncs == []
    store.finish(True, [("alloc", 1)], 1)
    need = links.write_out()                                      # and its sync is asked for
    assert need == 1 and store.synced == 0
    await asyncio.wait_for(links.durable(need), 10)
    assert store.synced >= need and len(syncs) == 1
    assert not links.waiters
    store.close()


async def test_without_a_state_directory_nothing_waits():
    links = BrokerLinks(_Broker())
    assert links.write_out() == 0
    await asyncio.wait_for(links.durable(5), 1)
    assert links.send_client(b"c", [b"at once"]) and links.b.local.sent == [[b"at once"]]
