"""Job data in the KVS's on-disk store, and purging inactive jobs, through the CLI."""

import pytest

pytestmark = pytest.mark.timeout(120)


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
