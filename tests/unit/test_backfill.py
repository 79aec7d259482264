"""EASY backfill as a pure function (job/easy.py): pending jobs in priority order,
free resources and running jobs' expected ends in; the jobs that start now and each
queue's reservation out."""

import pytest

from fluxlite.job import easy
from fluxlite.job import jobspec as js
from fluxlite.job import schema as jschema

NOW = 1000.0


def req(nnodes=None, ntasks=None, cores=1, gpus=None):
    spec = js.Jobspec.from_command(["true"], num_nodes=nnodes, num_tasks=ntasks,
                                   cores_per_task=cores, gpus_per_task=gpus)
    return jschema.request(spec.jobspec)


def pools(nranks=4, ncores=4, ngpus=0):
    total = easy.Pool({r: set(range(ncores)) for r in range(nranks)},
                      {r: set(range(ngpus)) for r in range(nranks)} if ngpus else {})
    return total, total.copy()


def job(i, r, duration=0.0, ranks=(0, 1, 2, 3), queue=""):
    return easy.Candidate(i, r, list(ranks), duration, queue)


def run(sweep, jobs):
    """{job id: alloc} of the jobs that start now."""
    out = {}
    for j in jobs:
        a = sweep.consider(j)
        if a is not None:
            out[j.id] = a
    return out


def busy(free, ranks, end):
    """A running job holding `ranks` whole until `end`."""
    a = easy.Alloc({r: sorted(free.cores[r]) for r in ranks})
    free.take(a)
    return (end, a)


def test_fit_packs_slots_with_their_gpus():
    total, free = pools(2, 4, 2)
    a = easy.fit(req(ntasks=3, gpus=1), [0, 1], free, total)
    assert a.cores == {0: [0, 1], 1: [0]} and a.gpus == {0: [0, 1], 1: [0]}
    free.take(a)
    b = easy.fit(req(ntasks=1, gpus=1), [0, 1], free, total)
    assert b.cores == {1: [1]} and b.gpus == {1: [1]}      # rank 0's GPUs are gone
    assert easy.fit(req(nnodes=1), [0, 1], free, total) is None   # no node is whole


def test_whole_nodes_take_all_their_gpus():
    total, free = pools(2, 4, 2)
    a = easy.fit(req(nnodes=2, ntasks=2, gpus=2), [0, 1], free, total)
    assert a.gpus == {0: [0, 1], 1: [0, 1]} and a.cores[1] == [0, 1, 2, 3]


def test_in_priority_order_what_fits_starts():
    total, free = pools()
    sweep = easy.Sweep(free, total, [], NOW)
    started = run(sweep, [job(1, req(nnodes=2)), job(2, req(ntasks=4)), job(3, req())])
    assert sorted(started) == [1, 2, 3] and sweep.reservations == {}


def test_short_job_backfills_before_the_reservation():
    total, free = pools()
    running = [busy(free, [0, 1], NOW + 100), busy(free, [2], NOW + 300)]
    sweep = easy.Sweep(free, total, running, NOW)
    wide = job(1, req(nnodes=3), 600)           # needs 3 whole nodes: at NOW+100
    short = job(2, req(nnodes=1), 50)           # ends at NOW+50: before the reservation
    long_ = job(3, req(nnodes=1), 500)          # would hold rank 3 past NOW+100
    started = run(sweep, [wide, long_, short])
    assert list(started) == [2]
    res = sweep.reservations[""]
    assert res.id == 1 and res.time == NOW + 100
    assert sorted(res.alloc.cores) == [0, 1, 3]


def test_long_job_backfills_where_the_reservation_is_not():
    total, free = pools()
    running = [busy(free, [0, 1], NOW + 100)]
    sweep = easy.Sweep(free, total, running, NOW)
    wide = job(1, req(nnodes=4), 600)          # all four: at NOW+100, ranks 0-3
    other = job(2, req(nnodes=1), 5000)        # would hold rank 2 or 3 past NOW+100
    assert run(sweep, [wide, other]) == {}
    # with the reservation on two nodes only, a long job may take a third
    total, free = pools(5)
    running = [busy(free, [0, 1], NOW + 100)]
    sweep = easy.Sweep(free, total, running, NOW)
    started = run(sweep, [job(1, req(nnodes=4), 600, range(5)),
                          job(2, req(nnodes=1), 5000, range(5))])
    assert list(started) == [2] and started[2].cores.keys() == {4}
    assert sorted(sweep.reservations[""].alloc.cores) == [0, 1, 2, 3]


def test_without_time_limits_the_order_is_strict():
    total, free = pools()
    running = [busy(free, [0, 1], easy.INF)]    # a running job with no time limit
    sweep = easy.Sweep(free, total, running, NOW)
    assert run(sweep, [job(1, req(nnodes=3)), job(2, req(), 10)]) == {}
    res = sweep.reservations[""]
    assert res.time == easy.INF and res.alloc is None and res.ranks == {0, 1, 2, 3}


def test_a_job_without_a_limit_never_backfills_into_a_reservation():
    total, free = pools()
    running = [busy(free, [0, 1, 2], NOW + 100)]
    sweep = easy.Sweep(free, total, running, NOW)
    started = run(sweep, [job(1, req(nnodes=4), 60), job(2, req(), 0.0), job(3, req(), 30)])
    assert list(started) == [3]


def test_each_queue_has_its_reservation():
    total, free = pools()
    running = [busy(free, [0], NOW + 100), busy(free, [2], NOW + 100)]
    sweep = easy.Sweep(free, total, running, NOW)
    a = job(1, req(nnodes=2), 60, (0, 1), "batch")
    b = job(2, req(nnodes=2), 60, (2, 3), "debug")
    c = job(3, req(), 500, (0, 1), "batch")     # batch's reservation holds rank 1
    d = job(4, req(), 50, (2, 3), "debug")      # ends before debug's reservation
    started = run(sweep, [a, b, c, d])
    assert list(started) == [4]
    assert set(sweep.reservations) == {"batch", "debug"}


def test_repeats_of_a_failed_request_are_remembered():
    total, free = pools(1, 1)
    sweep = easy.Sweep(free, total, [busy(free, [0], NOW + 5)], NOW)
    jobs = [job(i, req(ntasks=1), 10, (0,)) for i in range(1, 10001)]
    assert run(sweep, jobs) == {}
    assert len(sweep._failed) == 2    # the head (no reservation yet), then all the rest


@pytest.mark.parametrize("ranks,total_cores,request_,words", [
    ([0, 1], {0: 4, 1: 4}, req(ntasks=1, gpus=1), "need 1 slot(s) of 1 core(s) and 1 GPU(s)"),
    ([0], {0: 4, 1: 4}, req(nnodes=2), "only 1 eligible"),
])
def test_unsatisfiable_with_gpus_and_eligible_ranks(ranks, total_cores, request_, words):
    total = easy.Pool({r: set(range(n)) for r, n in total_cores.items()})
    why = easy.unsatisfiable(request_, ranks, total, " in queue q")
    assert why.startswith("unsatisfiable request in queue q: ") and words in why


def test_a_job_started_in_the_pass_counts_for_later_reservations():
    total, free = pools(2)
    sweep = easy.Sweep(free, total, [], NOW)
    started = run(sweep, [job(1, req(nnodes=1), 60, (0, 1)), job(2, req(nnodes=2), 30, (0, 1)),
                          job(3, req(), 10, (0, 1))])
    assert sorted(started) == [1, 3]
    assert sweep.reservations[""].time == NOW + 60
