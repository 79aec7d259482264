"""Chaos: jobs keep flowing while random non-root brokers are killed with SIGKILL.

A 7-broker instance (kary:2, so ranks 1 and 2 are interior and take their
subtrees with them) gets a stream of small jobs; after every few finish, a random
live non-root broker is killed.  Whatever a kill hits, every job must end
INACTIVE with a result that follows from what happened to it: COMPLETED with
exit 0, or FAILED with a node-failure (it ran on a lost rank) or an
unsatisfiable-request exception (it no longer fits).  Nothing may hang, and no
broker, shell or task may outlive the instance (the fixture checks).

FLUXLITE_CHAOS_JOBS (default 200), FLUXLITE_CHAOS_KILLS (default 3) and
FLUXLITE_CHAOS_SEED (default 1) choose the run; `make chaos` runs 1,000 jobs.
"""

from __future__ import annotations

import collections
import os
import random

import pytest

from fluxlite.jobapi import api
from fluxlite.testing import wait_event
from fluxlite.util import fluid
from fluxlite.util.tree import Topology

JOBS = int(os.environ.get("FLUXLITE_CHAOS_JOBS", "200"))
KILLS = int(os.environ.get("FLUXLITE_CHAOS_KILLS", "3"))
SEED = int(os.environ.get("FLUXLITE_CHAOS_SEED", "1"))
SIZE = 7

# a lost rank's jobs fail with a node failure; a job that no longer fits fails at once
EXPECTED_FAILURES = ("node failure", "unsatisfiable", "lost")


@pytest.mark.timeout(120 + JOBS)
def test_jobs_survive_random_broker_kills(instance_factory):
    rng = random.Random(SEED)
    inst = instance_factory(SIZE, topo="kary:2")
    h = inst.handle()
    out = inst.cli("submit", "--cc", f"1-{JOBS}", "sh", "-c", "exit 0", check=True,
                   timeout=60 + JOBS / 10).stdout.split()
    ids = [fluid.parse(s) for s in out]
    assert len(ids) == JOBS

    alive = list(range(1, SIZE))
    killed = []
    step = max(1, JOBS // (KILLS + 1))
    for k in range(KILLS):
        if not alive:
            break
        # wait (on the job's own event, bounded) until a share of the stream has run
        wait_event(h, ids[min(JOBS - 1, step * (k + 1) - 1)], "clean", timeout=60)
        victim = rng.choice(alive)
        inst.kill_broker(victim)
        gone = {victim, *_subtree(victim)}
        alive = [r for r in alive if r not in gone]
        killed.append(victim)

    results = collections.Counter()
    wrong = []
    hung = []
    for jobid in ids:
        try:
            r = api.wait(h, jobid, timeout=60)
        except Exception as exc:  # a wait that never ends is the failure we look for
            hung.append((jobid, repr(exc),
                         [e["name"] for e in api.event_watch(h, jobid, follow=False)]))
            continue
        results[r["result"]] += 1
        if r["result"] == "COMPLETED":
            if r.get("returncode", 0) != 0:
                wrong.append((jobid, r))
        elif not any(word in (r.get("errstr") or "") for word in EXPECTED_FAILURES):
            wrong.append((jobid, r))
    inactive = sum(1 for j in api.list_jobs(h, "inactive") if j["id"] in set(ids))
    print(f"chaos seed {SEED}: submitted {JOBS}, killed ranks {killed}, "
          f"INACTIVE {inactive}, results {dict(results)}, hung {len(hung)}, "
          f"wrong {len(wrong)}")
    if hung:  # what the stuck jobs and the scheduler looked like
        print("active:", [(j["id"], j["state"]) for j in api.list_jobs(h, "active")])
        print(h.call("sched.resource-status", {}))
    assert not hung, hung[:5]
    assert not wrong, wrong[:5]
    assert inactive == JOBS
    assert results["COMPLETED"] > 0
    # the survivors still run work
    assert inst.cli("run", "echo", "alive", check=True).stdout == "alive\n"


def _subtree(rank: int) -> list[int]:
    return Topology.kary(SIZE, 2).descendants(rank)
