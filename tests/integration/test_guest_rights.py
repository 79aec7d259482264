"""What a guest (a user other than the instance owner) may and may not do.

Each test starts an instance that admits guests (access.allow-guest-user) and
acts as one or two guest users through the real CLI, connected over the local
socket with their own uid (guestuser.py says how).  Flux refuses a guest the
owner's methods (module load/remove, config load/reload, resource reload,
jobtap load/remove, a module's debug flags and trace) with EPERM; a job's guest
namespace `job-ID` is its owner's and the instance owner's, nobody else's, and
a symbolic link in it leads nowhere its user could not go directly.
"""

from __future__ import annotations

import json

import guestuser
import pytest
from guestuser import GUEST, OTHER_GUEST

from fluxlite.testing import jobid_of, one_error_line


@pytest.fixture
def shared(instance_factory):
    guestuser.need_root()
    return instance_factory(1, setattrs=["access.allow-guest-user=1"])


def refused_to_guest(inst, *args) -> str:
    cp = guestuser.cli(inst, GUEST, *args)
    line = one_error_line(cp)
    assert "permission denied" in line, (args, line)
    assert "Traceback" not in cp.stderr
    return line


@pytest.mark.timeout(300)
def test_a_guest_is_refused_the_owners_methods(shared, tmp_path):
    inst = shared
    rfile = tmp_path / "R.json"
    rfile.write_text(inst.cli("resource", "R", check=True).stdout)
    conf = tmp_path / "conf.json"
    conf.write_text(json.dumps({"site": {"a": 1}}))
    for args in (["module", "remove", "sched"], ["module", "load", "sched"],
                 ["module", "reload", "log"], ["module", "debug", "--set", "1", "kvs"],
                 ["module", "stats", "--clear", "kvs"], ["config", "load", conf],
                 ["config", "reload"], ["config", "unset", "site.a"],
                 ["resource", "reload", rfile], ["resource", "acquire-mute"],
                 ["jobtap", "remove", ".begin-time"], ["jobtap", "load", ".begin-time"]):
        refused_to_guest(inst, *args)
    # `module trace` is a stream: it is refused before it starts
    refused_to_guest(inst, "module", "trace", "kvs")
    # nothing changed
    mods = inst.cli("module", "list", check=True).stdout
    assert "sched" in mods and "log" in mods
    assert "site" not in json.loads(inst.cli("config", "get", check=True).stdout)
    assert ".begin-time" in inst.cli("jobtap", "list", "-a", check=True).stdout
    # what a guest may do: read, and see who the broker thinks it is
    cp = guestuser.cli(inst, GUEST, "ping", "-u", "--count=1", "0")
    assert cp.returncode == 0, cp.stderr
    assert f"userid={GUEST} rolemask=0x2" in cp.stdout, cp.stdout
    assert guestuser.cli(inst, GUEST, "module", "list").returncode == 0
    assert inst.cli("run", "echo", "alive", check=True).stdout == "alive\n"


@pytest.mark.timeout(300)
def test_a_jobs_namespace_is_its_owners_and_odd_names_lead_nowhere(shared):
    inst = shared
    cp = guestuser.cli(inst, GUEST, "submit", "echo", "mine")
    jobid = jobid_of(cp)
    inst.cli("job", "wait-event", "-t", "30", str(jobid), "clean", check=True)
    ns = f"job-{jobid}"
    # its owner reads and writes it
    cp = guestuser.cli(inst, GUEST, "kvs", "get", "-N", ns, "exec.eventlog")
    assert cp.returncode == 0 and '"name":"done"' in cp.stdout, cp.stderr
    assert guestuser.cli(inst, GUEST, "kvs", "put", "-N", ns, "note=1").returncode == 0
    # another guest does neither, and the job's directory is as it was
    for args in (["kvs", "get", "-N", ns, "exec.eventlog"], ["kvs", "put", "-N", ns, "x=1"],
                 ["kvs", "unlink", "-N", ns, "note"], ["kvs", "ls", "-N", ns],
                 ["kvs", "getroot", "-N", ns], ["kvs", "wait", "-N", ns, "1"]):
        line = one_error_line(guestuser.cli(inst, OTHER_GUEST, *args))
        assert f"KVS namespace '{ns}': only the job's owner" in line, (args, line)
    assert inst.cli("kvs", "get", "-N", ns, "note", check=True).stdout == "1\n"
    # the owner's view of its root: the job's owner owns it
    assert inst.cli("kvs", "getroot", "-o", "-N", ns, check=True).stdout == f"{GUEST}\n"
    # names that only look like a job's: no such namespace, never another directory
    for odd in ("job-../../x", "job-0x1", "job--1", f"job-{jobid}.x", "job-",
                "job-99999999999999999999", "job-18446744073709551616", f" job-{jobid}"):
        for args in (["kvs", "get", "-N", odd, "exec.eventlog"],
                     ["kvs", "put", "-N", odd, "x=1"], ["kvs", "getroot", "-N", odd]):
            line = one_error_line(guestuser.cli(inst, GUEST, *args))
            assert "does not exist" in line, (odd, args, line)


@pytest.mark.timeout(300)
def test_a_link_leads_nowhere_its_user_may_not_go(shared):
    """A guest once read the owner's private namespace through a link it made in
    its job's namespace (the lookup followed it with no user), or in a namespace of
    its own with --waitcreate (the watch read it with no user)."""
    inst = shared
    inst.cli("kvs", "namespace", "create", "secret", check=True)
    inst.cli("kvs", "put", "-N", "secret", "pw=hunter2", check=True)
    inst.cli("kvs", "namespace", "create", "-o", str(GUEST), "mine", check=True)
    jobid = jobid_of(guestuser.cli(inst, GUEST, "submit", "true"))
    inst.cli("job", "wait-event", "-t", "30", str(jobid), "clean", check=True)
    for ns in (f"job-{jobid}", "mine"):
        cp = guestuser.cli(inst, GUEST, "kvs", "link", "-T", "secret", "pw", "-N", ns, "peek")
        assert cp.returncode == 0, cp.stderr
        for get in (["get"], ["get", "--waitcreate"], ["get", "--watch", "--count=1"],
                    ["get", "--waitcreate", "--watch", "--count=1"]):
            cp = guestuser.cli(inst, GUEST, "kvs", *get, "-N", ns, "peek", timeout=30)
            line = one_error_line(cp)
            assert "hunter2" not in cp.stdout
            assert "KVS namespace 'secret': only its owner" in line, (ns, get, line)
        # the instance owner follows the same link
        assert inst.cli("kvs", "get", "-N", ns, "peek", check=True).stdout == "hunter2\n"


@pytest.mark.timeout(120)
def test_a_link_made_in_a_jobs_namespace_leads_within_it(inst1):
    """As in Flux's guest namespace: a link to KEY made in job-ID is job-ID's KEY (it
    once led to the primary namespace's KEY), and reads back as written."""
    jobid = jobid_of(inst1.cli("submit", "echo", "hi"))
    inst1.cli("job", "wait-event", "-t", "30", str(jobid), "clean", check=True)
    ns = f"job-{jobid}"
    inst1.cli("kvs", "put", "exec.eventlog=the primary namespace's", check=True)
    inst1.cli("kvs", "link", "-N", ns, "exec.eventlog", "mylink", check=True)
    got = inst1.cli("kvs", "get", "-N", ns, "mylink", check=True).stdout
    assert '"name":"init"' in got and "primary" not in got, got
    assert inst1.cli("kvs", "readlink", "-N", ns, "mylink", check=True).stdout == \
        "exec.eventlog\n"
    # the same through Flux's form of the operation
    h = inst1.handle()
    h.call("kvs.commit", {"namespace": ns, "ops": [
        {"key": "flux-link", "flags": 0,
         "dirent": {"ver": 1, "type": "symlink", "data": {"target": "exec.eventlog"}}}]})
    got = inst1.cli("kvs", "get", "-N", ns, "flux-link", check=True).stdout
    assert '"name":"init"' in got, got
    # a link naming a namespace is left as it is
    inst1.cli("kvs", "link", "-N", ns, "-T", "primary", "exec.eventlog", "out", check=True)
    assert inst1.cli("kvs", "get", "-N", ns, "out", check=True).stdout == \
        "the primary namespace's\n"
