"""`fluxlite dump` / `fluxlite restore` (Flux's flux-dump / flux-restore), through the CLI.

History moves: an instance's KVS archived with dump, restored into a new state
directory, and an instance started there has the same jobs, output and keys.
"""

import subprocess
import tarfile

import pytest

from fluxlite.protocol import kvs as kvsv
from fluxlite.testing import fluxlite_command, one_error_line


def _cli(*args, **kw):
    return subprocess.run(fluxlite_command() + [str(a) for a in args], capture_output=True,
                          text=True, timeout=120, **kw)


def _jobs(inst):
    return inst.cli("jobs", "-a", "-n", "-o", "{id.f58} {state} {result} {name}",
                    check=True).stdout


@pytest.mark.timeout(180)
def test_dump_then_restore_into_a_new_statedir(instance_factory, tmp_path):
    a = instance_factory(1)          # no state directory: dump works on any instance
    ids = a.cli("submit", "--cc=1-3", "sh", "-c", "echo out {cc}", check=True).stdout.split()
    for j in ids:
        a.cli("job", "wait-event", j, "clean", check=True)
    held = a.cli("submit", "--urgency=hold", "true", check=True).stdout.strip()
    a.cli("kvs", "put", "site.name=lab", "site.nodes=[1,2]", check=True)
    archive = tmp_path / "history.tar"
    cp = a.cli("dump", archive, check=True)
    assert "archived" in cp.stderr
    before = _jobs(a)
    names = tarfile.open(archive).getnames()
    assert "site/name" in names and any(n.endswith("/guest/output") for n in names)

    sd = tmp_path / "moved"
    cp = _cli("restore", "--statedir", sd, archive)
    assert cp.returncode == 0, cp.stderr
    b = instance_factory(1, setattrs=[f"statedir={sd}"])
    after = _jobs(b)
    assert after == before
    assert f"{held} SCHED" in after
    for n, j in enumerate(ids, start=1):
        assert b.cli("job", "attach", j, check=True).stdout == f"out {n}\n"
    assert b.cli("kvs", "get", "site.name", "site.nodes", check=True).stdout == "lab\n[1, 2]\n"


@pytest.mark.timeout(60)
def test_restore_refuses_what_is_not_a_dump(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("hello\n")
    cp = _cli("restore", "--statedir", tmp_path / "sd", bad)
    assert cp.returncode == 1
    assert "not an archive fluxlite dump wrote" in one_error_line(cp)
    assert not (tmp_path / "sd").exists()


@pytest.mark.timeout(120)
def test_restore_refuses_a_statedir_with_history(instance_factory, tmp_path):
    sd = tmp_path / "sd"
    a = instance_factory(1, setattrs=[f"statedir={sd}"])
    a.cli("kvs", "put", "x=1", check=True)
    archive = tmp_path / "a.tar"
    a.cli("dump", archive, check=True)
    assert a.stop() == 0
    cp = _cli("restore", "--statedir", sd, archive)
    assert cp.returncode == 1
    assert "already holds a state database" in one_error_line(cp)


@pytest.mark.timeout(180)
def test_a_job_output_larger_than_a_commit_restores_whole(instance_factory, tmp_path):
    a = instance_factory(1)
    big = a.cli("submit", "sh", "-c", "yes abcdefghij | head -c 6000000", check=True)
    jobid = big.stdout.strip()
    a.cli("job", "wait-event", jobid, "clean", check=True)
    archive = tmp_path / "big.tar"
    a.cli("dump", archive, check=True)
    sd = tmp_path / "moved"
    cp = _cli("restore", "--statedir", sd, archive)
    assert cp.returncode == 0, cp.stderr
    b = instance_factory(1, setattrs=[f"statedir={sd}"])
    out = b.cli("job", "attach", jobid, check=True, timeout=120).stdout
    assert len(out) == 6000000 and out.startswith("abcdefghij\n")


@pytest.mark.timeout(120)
def test_symbolic_links_are_archived_as_links(instance_factory, tmp_path):
    a = instance_factory(1)
    h = a.handle()
    h.call("kvs.namespace-create", {"namespace": "side"})
    h.call("kvs.commit", {"ops": [{"key": "d.v", "value": 1},
                                  {"key": "to_v", "symlink": "d.v"},
                                  {"key": "to_d", "symlink": "d"},
                                  {"key": "dangling", "symlink": "no.such"},
                                  {"key": "aside", "symlink": "x", "target_namespace": "side"}]})
    archive = tmp_path / "links.tar"
    a.cli("dump", archive, check=True)
    members = {m.name: m for m in tarfile.open(archive).getmembers()}
    assert members["to_d"].issym() and members["to_d"].linkname == "d"
    assert members["dangling"].linkname == "no.such"
    assert members["aside"].pax_headers["FLUXLITE.namespace"] == "side"

    b = instance_factory(1)
    b.cli("restore", archive, check=True)
    hb = b.handle()
    assert kvsv.value(hb.call("kvs.lookup", {"key": "to_v"})) == 1
    assert kvsv.value(hb.call("kvs.lookup", {"key": "to_d.v"})) == 1
    for key, data in [("dangling", {"target": "no.such"}),
                      ("aside", {"target": "x", "namespace": "side"})]:
        val = hb.call("kvs.lookup", {"key": key, "flags": 2})["val"]     # READLINK
        assert val == {"ver": 1, "type": "symlink", "data": data}
