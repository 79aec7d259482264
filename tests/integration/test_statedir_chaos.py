"""Chaos: rank 0 killed with SIGKILL at random moments, 20 times, while work is acknowledged.

Each cycle starts an instance on the same state directory, checks that every
job id a submit returned and every `kvs put` that returned in any earlier
cycle is there (and nothing twice), then submits jobs and writes keys from
two clients until rank 0 is killed at a random moment.  What was in flight
when it died may or may not be there; what was acknowledged must be.  The
counts are printed for the bench (acknowledged, found, lost).
"""

import random
import threading
import time

import pytest

from fluxlite.client.sync import Handle
from fluxlite.job import jobspec as js
from fluxlite.jobapi import api
from fluxlite.protocol import kvs as kvsv

CYCLES = 20
PER_CYCLE = 50   # submits and puts a client makes at most in a cycle: bounded work, as
#                  on 2 cores a backlog of thousands of pending jobs would only grow
SPEC = js.Jobspec.from_command(["true"]).jobspec


def _submitter(uri, acked: list, stop: threading.Event):
    try:
        h = Handle(uri)
    except Exception:
        return
    try:
        for _ in range(PER_CYCLE):
            if stop.is_set():
                break
            acked.append(api.submit(h, SPEC))
    except Exception:
        pass   # rank 0 died: what was in flight is not acknowledged
    finally:
        h.close()


def _writer(uri, cycle: int, acked: dict, stop: threading.Event):
    try:
        h = Handle(uri)
    except Exception:
        return
    n = 0
    try:
        while not stop.is_set() and n < PER_CYCLE:
            key, value = f"chaos.c{cycle}.k{n}", f"{cycle}:{n}"
            h.call("kvs.commit", {"ops": [{"key": key, "value": value}]}, timeout=30)
            acked[key] = value
            n += 1
    except Exception:
        pass
    finally:
        h.close()


def _check(inst, jobs: list[int], keys: dict) -> tuple[int, int]:
    """(found, lost) of what was acknowledged; no job appears twice."""
    h = inst.handle()
    table = h.call("job-manager.list", {"states": "all"}, timeout=60)["jobs"]
    ids = [j["id"] for j in table]
    assert len(ids) == len(set(ids)), "a job appears twice"
    have = set(ids)
    lost = [j for j in jobs if j not in have]
    for key, value in keys.items():
        try:
            got = kvsv.value(h.call("kvs.lookup", {"key": key}, timeout=30))
        except Exception:
            got = None
        if got != value:
            lost.append(key)
    return len(jobs) + len(keys) - len(lost), len(lost)


@pytest.mark.timeout(600)
def test_nothing_acknowledged_is_lost_across_20_kills_of_rank0(instance_factory, tmp_path):
    rng = random.Random(30)
    sd = tmp_path / "state"
    jobs: list[int] = []
    keys: dict[str, str] = {}
    lost_total = 0
    for cycle in range(CYCLES):
        inst = instance_factory(1, setattrs=[f"statedir={sd}"])
        try:
            found, lost = _check(inst, jobs, keys)
        except Exception:
            inst.proc.wait(timeout=60)
            raise AssertionError(f"cycle {cycle}: {inst.stderr_tail()}") from None
        assert lost == 0, f"cycle {cycle}: {lost} acknowledged items lost"
        lost_total += lost
        stop = threading.Event()
        threads = [threading.Thread(target=_submitter, args=(inst.uri, jobs, stop)),
                   threading.Thread(target=_writer, args=(inst.uri, cycle, keys, stop))]
        for t in threads:
            t.start()
        time.sleep(rng.uniform(0.05, 0.5))   # the random moment of the kill (not a wait)
        inst.kill_broker(0)
        inst.proc.wait(timeout=60)
        stop.set()
        for t in threads:
            t.join(timeout=60)
            assert not t.is_alive()
    last = instance_factory(1, setattrs=[f"statedir={sd}"])
    found, lost = _check(last, jobs, keys)
    print(f"chaos: {CYCLES} kills of rank 0; acknowledged {len(jobs)} jobs and "
          f"{len(keys)} kvs puts; found after restart {found}; lost {lost + lost_total}")
    assert lost == 0
    assert jobs and keys   # work really was acknowledged between the kills
