"""A full disk under the run directory: one log line when writing out starts failing
and one when it works again (not one per commit); what the KVS holds meanwhile is
bounded, past which client commits are refused with ENOSPC and a job whose output
cannot be kept says so; everything acknowledged is written once there is room."""

import contextlib
import errno
import os
import time

import pytest
from rawpeer import rss_kib
from smalldisk import fill, small_disk

from fluxlite.errors import FluxliteError
from fluxlite.protocol import kvs as kvsv
from fluxlite.service.kvs_store import HELD_MAX
from fluxlite.testing import Instance, _readline

pytestmark = pytest.mark.timeout(240)

CHUNK = 2 << 20


@contextlib.contextmanager
def log_follower(inst):
    with inst.cli_background("dmesg", "-f") as f:
        def wait_for(words, timeout=60):
            deadline = time.monotonic() + timeout
            while True:
                line = _readline(f.stdout, max(0.0, deadline - time.monotonic()))
                assert line, f"no log line with {words!r} within {timeout}s"
                if words in line:
                    return line
        yield wait_for


def test_full_disk_is_two_lines_bounded_memory_and_enospc(tmp_path):
    with small_disk(tmp_path / "disk", "96m") as disk:
        inst = Instance(1, start_args=["--rundir", os.path.join(disk, "rd")])
        with inst, log_follower(inst) as wait_for:
            h = inst.handle()
            pid = inst.broker_pid(0)
            filler = fill(disk)
            before = rss_kib(pid)
            acked = []
            refused = None
            for i in range(4 * HELD_MAX // CHUNK):
                # random text: the store compresses what it keeps
                value = {"i": i, "data": os.urandom(CHUNK // 2).hex()}
                try:
                    h.call("kvs.commit", {"ops": [{"key": f"big.k{i}", "value": value}]})
                except FluxliteError as exc:
                    refused = exc
                    break
                acked.append(i)
            assert refused is not None, "commits were never refused"
            assert refused.errnum == errno.ENOSPC and "commit refused" in refused.message
            grown = rss_kib(pid) - before
            assert grown < (HELD_MAX >> 10) * 2, f"rank 0 grew by {grown} KiB"
            assert inst.cli("ping", "-c", "1", "0").returncode == 0
            # a job whose output cannot be kept says so
            cp = inst.cli("run", "echo", "hello", timeout=60)
            assert cp.returncode != 0
            st = inst.cli("jobs", "-a", "-n", "-o", "{exception.type}|{exception.note}")
            assert "exec|job output lost" in st.stdout, st.stdout
            log = inst.cli("dmesg").stdout
            assert log.count("writing out failed") == 1, log
            # room again: one line, and everything acknowledged is there
            os.unlink(filler)
            wait_for("writing out works again")
            assert inst.cli("dmesg").stdout.count("writing out failed") == 1
            for i in (acked[0], acked[-1]):
                v = kvsv.value(h.call("kvs.lookup", {"key": f"big.k{i}"}))
                assert v["i"] == i and len(v["data"]) == CHUNK
            h.call("kvs.commit", {"ops": [{"key": "after", "value": {"ok": 1}}]})
