"""Threads and handles: a blocking Handle refuses a second thread at once with a
clear error (it never hangs), one Handle per thread works, and one Executor is
shared by several threads."""

import concurrent.futures
import threading

import pytest

from fluxlite.client.sync import Handle
from fluxlite.errors import WrongThread
from fluxlite.job import Jobspec
from fluxlite.jobapi import Executor, api

pytestmark = pytest.mark.timeout(120)

WAIT = 60


def run_in_threads(n, fn):
    """fn(i) in n threads at once; their results (or exceptions), in order."""
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        futs = [pool.submit(fn, i) for i in range(n)]
        concurrent.futures.wait(futs, timeout=WAIT)
        return [f.exception(timeout=0) or f.result(timeout=0) for f in futs]


def test_four_threads_sharing_one_handle_are_refused_at_once(inst1):
    h = Handle(inst1.uri)
    try:
        assert h.getattr("size") == "1"
        outcomes = run_in_threads(4, lambda i: h.getattr("size"))
        assert all(isinstance(o, WrongThread) for o in outcomes), outcomes
        assert "cannot be shared between threads" in str(outcomes[0])
        assert "open one per thread" in str(outcomes[0])
        # the owner is unharmed: nothing was sent or left pending by the others
        assert len(h.tracker) == 0
        assert api.submit(h, Jobspec.from_command(["true"]).jobspec) > 0
    finally:
        h.close()


def test_one_handle_per_thread(inst1):
    def work(i):
        with Handle(inst1.uri) as h:
            ids = [api.submit(h, Jobspec.from_command(["true"]).jobspec) for _ in range(5)]
            return [api.wait(h, j, timeout=WAIT)["success"] for j in ids]
    assert run_in_threads(4, work) == [[True] * 5] * 4


def test_eight_threads_share_one_executor_fifty_jobs_each(instance_factory):
    inst = instance_factory(1, cores_per_rank=4)
    with Executor(inst.uri) as ex:
        def work(i):
            futs = [ex.submit(Jobspec.from_command(["sh", "-c", f"exit {i}"]))
                    for _ in range(50)]
            return [f.result(timeout=WAIT * 3) for f in futs]
        assert run_in_threads(8, work) == [[i] * 50 for i in range(8)]
    assert not [t for t in threading.enumerate() if t.name == "fluxlite-executor"]
