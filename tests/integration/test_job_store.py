"""Job data in the KVS's on-disk store, and purging inactive jobs, through the CLI."""

import pytest

from fluxlite.protocol import kvs as kvsv
from fluxlite.testing import one_error_line

pytestmark = pytest.mark.timeout(120)

def ls(h, payload, **kw) -> list[str]:
    """A directory's names (kvs.lookup with FLUX_KVS_READDIR)."""
    return kvsv.entries(h.call("kvs.lookup", {**payload, "flags": kvsv.READDIR}, **kw))[0]



def jobid_of(cp) -> str:
    return cp.stdout.strip().splitlines()[-1]


def test_large_output_is_read_back_from_the_store(inst1):
    """2 MB of output goes to disk, not rank 0's heap; attach reads it back whole."""
    h = inst1.handle()
    before = h.call("kvs.stats")["store_entries"]
    script = "i=0; while [ $i -lt 20000 ]; do echo line-$i-abcdefghijklmnopqrstuvwxyz0123456789" \
             "abcdefghijklmnopqrstuvwxyz; i=$((i+1)); done"
    jobid = jobid_of(inst1.cli("submit", "sh", "-c", script, check=True))
    inst1.cli("job", "wait", jobid, check=True, timeout=60)
    assert h.call("kvs.stats")["store_entries"] > before
    out = inst1.cli("job", "attach", jobid, check=True, timeout=60).stdout.splitlines()
    assert len(out) == 20000
    assert out[0].startswith("line-0-") and out[-1].startswith("line-19999-")


def test_num_limit_purges_the_oldest_inactive_jobs(instance_factory):
    inst = instance_factory(1, setattrs=["job-manager.inactive-num-limit=2"])
    h = inst.handle()
    store0 = h.call("kvs.stats")["store_entries"]
    ids = inst.cli("submit", "--cc=1-4", "--wait", "seq", "1", "20000", check=True,
                   timeout=60).stdout.split()
    listed = inst.cli("jobs", "-a", "--no-header", "-o", "{id.f58}", check=True).stdout.split()
    # the two that ended last are kept (jobs running side by side end in any order)
    assert len(listed) == 2 and set(listed) <= set(ids), (listed, ids)
    purged = [i for i in ids if i not in listed]
    stats = inst.cli("jobs", "--stats-only", "-A").stdout
    assert stats.endswith(", 2 inactive purged\n"), stats
    kept = h.call("kvs.stats")["store_entries"]
    assert kept > store0  # the output of the jobs kept is on disk
    old = purged[0]
    for args in (["jobs", old], ["job", "info", old, "jobspec"], ["job", "attach", old],
                 ["job", "wait", old], ["job", "eventlog", old]):
        line = one_error_line(inst.cli(*args))
        assert line == f"fluxlite {args[0] if args[0] == 'jobs' else 'job ' + args[1]}: " \
                       f"unknown job id {old}", line
    out = inst.cli("job", "attach", listed[0], check=True).stdout.split()
    assert out == [str(i) for i in range(1, 20001)]
    inst.cli("job", "purge", "--num-limit=0", "--force", check=True)
    assert h.call("kvs.stats")["store_entries"] == store0  # purged with its jobs


def test_job_purge_counts_then_purges_by_num_and_age(inst1):
    ids = inst1.cli("submit", "--cc=1-5", "--wait", "true", check=True).stdout.split()
    assert inst1.cli("job", "purge", check=True).stdout == \
        "use --force to purge 0 of 5 inactive jobs\n"
    assert inst1.cli("job", "purge", "--num-limit=3", check=True).stdout == \
        "use --force to purge 2 of 5 inactive jobs\n"
    assert inst1.cli("job", "purge", "--num-limit=3", "-f", check=True).stdout == \
        "purged 2 inactive jobs, 3 remaining\n"
    listed = inst1.cli("jobs", "-a", "--no-header", "-o", "{id.f58}", check=True).stdout.split()
    gone = [i for i in ids if i not in listed]
    assert len(listed) == 3 and len(gone) == 2
    assert one_error_line(inst1.cli("job", "info", gone[0], "R")) == \
        f"fluxlite job info: unknown job id {gone[0]}"
    assert inst1.cli("job", "purge", "--age-limit=1h", "--force", check=True).stdout == \
        "purged 0 inactive jobs, 3 remaining\n"
    assert inst1.cli("job", "purge", "--force", listed[0], check=True).stdout == \
        "purged 1 inactive jobs, 2 remaining\n"
    assert inst1.cli("job", "purge", "--age-limit=0", "--force", check=True).stdout == \
        "purged 2 inactive jobs, 0 remaining\n"
    assert inst1.cli("jobs", "-a", "--no-header", check=True).stdout == ""


def test_job_purge_bad_input(inst1):
    running = jobid_of(inst1.cli("submit", "sleep", "30", check=True))
    assert "not inactive" in one_error_line(inst1.cli("job", "purge", "-f", running))
    assert "'bad' is not a valid Flux Standard Duration" in \
        one_error_line(inst1.cli("job", "purge", "--age-limit=bad"))
    assert "--num-limit" in one_error_line(inst1.cli("job", "purge", "--num-limit=-1"))
    assert "not both" in one_error_line(inst1.cli("job", "purge", "--num-limit=1", running))
    assert "unknown job id" in one_error_line(inst1.cli("job", "purge", "ƒ1"))
    assert "inactive-num-limit" in one_error_line(
        inst1.cli("setattr", "job-manager.inactive-num-limit", "many"))
    inst1.cli("cancel", running, check=True)


def test_age_limit_purges_a_job_once_it_is_old_enough(inst1):
    from fluxlite.job.eventlog import job_key
    from fluxlite.util import fluid
    inst1.cli("setattr", "job-manager.inactive-age-limit", "0.3s", check=True)
    jobid = jobid_of(inst1.cli("submit", "true", check=True))
    h = inst1.handle()
    # the job's directory goes when it is purged: that ends a watch on its eventlog
    flags = kvsv.WATCH | kvsv.WATCH_APPEND | kvsv.WAITCREATE
    stream = h.stream("kvs-watch.lookup", {"key": job_key(fluid.parse(jobid), "eventlog"),
                                           "flags": flags}, timeout=30)
    names = [e["name"] for r in stream for e in kvsv.value(r)]
    assert names[-1] == "clean"
    assert one_error_line(inst1.cli("jobs", jobid)) == f"fluxlite jobs: unknown job id {jobid}"


def test_the_store_file_goes_when_the_instance_stops(instance_factory, tmp_path):
    import os
    rundir = tmp_path / "rd"
    inst = instance_factory(1, start_args=["--rundir", str(rundir)])
    path = os.path.join(str(rundir), "content.sqlite")
    assert os.path.exists(path)
    assert inst.stop() == 0
    assert not os.path.exists(path)
    assert os.path.isdir(str(rundir))


def test_a_purged_job_leaves_nothing_in_the_kvs(inst1):
    """Purging takes the job's data from the store and its path from the tree: the
    directories of its id (job.0000.0004.b200...) do not pile up, one per millisecond
    of submissions, in rank 0's heap."""
    h = inst1.handle()
    store0 = h.call("kvs.stats")["store_entries"]
    ids = inst1.cli("submit", "--cc=1-3", "--wait", "echo", "hi", check=True).stdout.split()
    assert h.call("kvs.stats")["store_entries"] > store0   # jobspecs, R, eventlogs
    assert inst1.cli("job", "attach", ids[0], check=True).stdout == "hi\n"
    assert ls(h, {"key": "job"})
    inst1.cli("job", "purge", "--num-limit=0", "--force", check=True)
    assert ls(h, {"key": "job"}) == []
    assert h.call("kvs.stats")["store_entries"] == store0
