"""flux-resource's -i/--include (ranks or hosts), -q/--queue, --skip-empty, undrain
-f/-u and REASON, drain and undrain of hostlists, and eventlog -T, -L, -m, -i,
through the real CLI."""

from __future__ import annotations

import datetime

import pytest

from fluxlite.testing import one_error_line

pytestmark = pytest.mark.timeout(120)


def out(inst, *args) -> list[str]:
    return inst.cli("resource", *args, check=True).stdout.splitlines()


def test_include_and_skip_empty(inst4):
    assert out(inst4, "list", "-n", "-i", "1-2", "-o", "{state} {nnodes} {ranks}") == \
        ["free 2 1-2"]      # -i leaves out empty rows
    rows = out(inst4, "list", "-n", "-i", "3", "--no-skip-empty", "-o", "{state} {nnodes}")
    assert rows == ["free 1", "allocated 0", "down 0"]
    assert out(inst4, "list", "-n", "--skip-empty", "-o", "{state} {nnodes}") == ["free 4"]
    assert out(inst4, "status", "-n", "-i", "0,3", "--skip-empty",
               "-o", "{state} {nnodes} {ranks}") == ["avail 2 0,3"]
    assert out(inst4, "info", "-i", "0-1") == ["2 Nodes, 4 Cores, 0 GPUs"]
    # a hostlist names the ranks on those hosts (all four share this host here)
    host = inst4.getattr("hostname")
    assert out(inst4, "info", "-i", host) == ["4 Nodes, 8 Cores, 0 GPUs"]
    assert out(inst4, "info", "-i", "no-such-host") == ["0 Nodes, 0 Cores, 0 GPUs"]


def test_queue_filter(inst4):
    cp = inst4.cli("resource", "list", "-q", "batch")
    assert cp.returncode == 2
    assert "unknown queue 'batch' (no queues are configured)" in one_error_line(cp)


def test_undrain_force_update_and_reason(inst4):
    inst4.cli("resource", "drain", "1", "testing", check=True)
    listed = out(inst4, "drain", "-n", "-i", "0-1", "-o", "{state} {ranks} {reason}")
    assert listed == ["drained 1 testing"]
    cp = inst4.cli("resource", "undrain", "0-1")
    assert cp.returncode == 1 and "rank 0 is not drained" in one_error_line(cp)
    inst4.cli("resource", "undrain", "-f", "0-2", "back", "in", "service", check=True)
    assert out(inst4, "drain", "-n") == []
    inst4.cli("resource", "undrain", "-u", "0", check=True)   # none drained: no error
    host = inst4.getattr("hostname")
    inst4.cli("resource", "drain", host, "all of this host", check=True)
    assert out(inst4, "drain", "-n", "-o", "{ranks}") == ["0-3"]
    inst4.cli("resource", "undrain", host, check=True)


def test_eventlog_time_formats_match_and_include(inst4):
    inst4.cli("resource", "drain", "2", "for the log", check=True)
    inst4.cli("resource", "undrain", "2", check=True)
    raw = out(inst4, "eventlog")
    assert raw[0].split()[1] == "resource-define"
    offset = out(inst4, "eventlog", "-T", "offset", "-L")
    assert offset[0].startswith("0.000000 resource-define")
    iso = out(inst4, "eventlog", "-T", "iso", "--color=never")
    when = datetime.datetime.strptime(iso[0].split()[0], "%Y-%m-%dT%H:%M:%S.%fZ")
    assert abs(when.replace(tzinfo=datetime.UTC).timestamp() - float(raw[0].split()[0])) < 1e-3
    # -i: entries about rank 1 only (and those about no rank in particular)
    names = [ln.split()[1] for ln in out(inst4, "eventlog", "-i", "1")]
    assert "drain" not in names and "online" in names
    assert "drain" in [ln.split()[1] for ln in out(inst4, "eventlog", "-i", "2")]
    # --wait with -m: the drain of rank 2, not another event of that name
    last = out(inst4, "eventlog", "-w", "drain", "-m", "idset=2", "-t", "30s")[-1]
    assert last.split()[1:3] == ["drain", 'idset="2"']
