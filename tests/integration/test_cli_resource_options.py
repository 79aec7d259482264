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


def test_reload_replaces_the_inventory_while_idle(instance_factory, tmp_path):
    import json
    inst = instance_factory(2, cores_per_rank=4)
    R = json.loads(inst.cli("resource", "R", check=True).stdout)
    R["execution"]["R_lite"] = [{"rank": "0-1", "children": {"core": "0-1"}}]
    (tmp_path / "R.json").write_text(json.dumps(R))
    inst.cli("resource", "reload", str(tmp_path / "R.json"), check=True)
    assert out(inst, "list", "-n", "-s", "free", "-o", "{nnodes} {ncores}") == ["2 4"]
    # the scheduler works from the new set: 5 cores no longer fit
    cp = inst.cli("run", "-n", "5", "true")
    assert cp.returncode != 0 and "unsatisfiable" in cp.stderr
    assert inst.cli("run", "-n", "4", "true").returncode == 0
    assert any("resource-define" in ln and 'method="reload"' in ln
               for ln in out(inst, "eventlog"))

    R["execution"]["R_lite"] = [{"rank": "0-3", "children": {"core": "0-2"}}]
    (tmp_path / "R4.json").write_text(json.dumps(R))
    line = one_error_line(inst.cli("resource", "reload", str(tmp_path / "R4.json")))
    assert "rank(s) 2-3 are not in this instance of size 2" in line
    inst.cli("resource", "reload", "-f", str(tmp_path / "R4.json"), check=True)
    assert out(inst, "list", "-n", "-s", "free", "-o", "{ncores}") == ["6"]

    xml = tmp_path / "xml"
    xml.mkdir()
    cores = "".join(f'<object type="Core" os_index="{i}"/>' for i in range(3))
    for rank in (0, 1):
        (xml / f"{rank}.xml").write_text(f'<topology><object type="Machine">{cores}'
                                         "</object></topology>")
    inst.cli("resource", "reload", "-x", str(xml), check=True)
    assert out(inst, "list", "-n", "-s", "free", "-o", "{ncores}") == ["6"]

    # not while a job holds resources
    job = inst.cli("submit", "sleep", "300", check=True).stdout.strip()
    inst.cli("job", "wait-event", "-t", "30", job, "start", check=True)
    line = one_error_line(inst.cli("resource", "reload", str(tmp_path / "R.json")))
    assert line.startswith("fluxlite resource reload: Device or resource busy: 1 job(s)")
    assert out(inst, "list", "-n", "-o", "{state} {ncores}")[0] == "free 5"   # unchanged
    inst.cli("cancel", job, check=True)

    for args, words in [((str(tmp_path / "nosuch.json"),), "No such file or directory"),
                        (("-x", str(tmp_path / "R.json")), "not a directory"),
                        (("-x", str(tmp_path)), "no <rank>.xml files")]:
        assert words in one_error_line(inst.cli("resource", "reload", *args))


def test_acquire_mute_stops_updates_to_the_scheduler(inst4):
    inst4.cli("resource", "acquire-mute", check=True)
    inst4.cli("resource", "drain", "3", "maintenance", check=True)
    # the resource service knows rank 3 is drained; the scheduler was not told
    assert "drained" in " ".join(out(inst4, "status", "-n", "-i", "3", "-o", "{state}"))
    assert out(inst4, "list", "-n", "-s", "down", "-o", "{nnodes}") == ["0"]
