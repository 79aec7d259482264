"""flux-kvs's get (-r, -t, -l, -W, -w with -c, -u and -A, -f, -S, -a), put (-t, -s,
-S, -O, -b) and ls (columns, -1, -w, -F, -d, several keys) options, through the
real CLI."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from fluxlite.testing import fluxlite_command, one_error_line

pytestmark = pytest.mark.timeout(120)


def out(inst, *args, **kw) -> str:
    return inst.cli("kvs", *args, check=True, **kw).stdout


def test_get_raw_label_treeobj(inst1):
    inst1.cli("kvs", "put", "n=1", "s=hello", check=True)
    assert out(inst1, "get", "-l", "n", "s") == "n=1\ns=hello\n"
    assert out(inst1, "get", "-r", "s") == "hello"
    assert out(inst1, "get", "-t", "n") == '{"ver":1,"type":"val","data":"MQ=="}\n'
    assert out(inst1, "get", "-f", "-S", "n") == "1\n"
    cp = inst1.cli("kvs", "get", "-a", '{"ver":1,"type":"dirref","data":[]}', "n")
    assert cp.returncode == 1 and "--at" in one_error_line(cp)


def _start(inst, *args) -> subprocess.Popen:
    return subprocess.Popen(fluxlite_command() + ["kvs", *args], env=inst.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _first_line(proc: subprocess.Popen) -> str:
    return proc.stdout.readline()


def test_get_waitcreate_and_watch_count_uniq_append(inst1):
    waiter = _start(inst1, "get", "-W", "later")
    try:
        # whether its watch was in before the key was written or not, -W prints the
        # value once there is one (without -W, a missing key is an error)
        inst1.cli("kvs", "put", "later=5", check=True)
        assert waiter.communicate(timeout=30)[0] == "5\n"
    finally:
        waiter.kill()
        waiter.wait()
    inst1.cli("kvs", "put", "w=0", check=True)
    watcher = _start(inst1, "get", "-w", "-u", "-c", "3", "w")
    try:
        assert _first_line(watcher) == "0\n"     # the value now, then each change
        for v in ("0", "1", "1", "2"):
            inst1.cli("kvs", "put", f"w={v}", check=True)
        rest = watcher.communicate(timeout=30)[0]
        assert rest == "1\n2\n"                  # -u: equal values left out; -c 3 in all
    finally:
        watcher.kill()
        watcher.wait()
    inst1.cli("kvs", "put", "-A", "log=a", check=True)   # a string: the text appended
    appends = _start(inst1, "get", "-w", "-A", "-c", "2", "log")
    try:
        assert _first_line(appends) == "a\n"
        inst1.cli("kvs", "put", "-A", "log=b", check=True)
        assert appends.communicate(timeout=30)[0] == "b\n"   # only what was appended
    finally:
        appends.kill()
        appends.wait()
    cp = inst1.cli("kvs", "get", "never")
    assert cp.returncode != 0


def test_put_treeobj_sequence_sync(inst1):
    before = int(out(inst1, "put", "-s", "-S", "x=1"))
    after = int(out(inst1, "put", "-s", "x=2"))
    assert after > before
    inst1.cli("kvs", "put", "-t", 't={"ver":1,"type":"val","data":"Mw=="}', check=True)
    assert out(inst1, "get", "t") == "3\n"
    for opt in ("-O", "-b"):
        cp = inst1.cli("kvs", "put", opt, "y=1")
        assert cp.returncode == 1 and "content store" in one_error_line(cp)
    assert inst1.cli("kvs", "get", "y").returncode != 0   # nothing was written


def test_ls_as_flux_prints_it(inst1):
    inst1.cli("kvs", "put", "d.alpha=1", "d.b=2", "d.sub.x=3", "top=4", check=True)
    inst1.cli("kvs", "link", "d.b", "d.lnk", check=True)
    # columns as wide as the longest name + 4, as many as fit in 80 (not a terminal)
    assert out(inst1, "ls", "d", env={"COLUMNS": ""}) == \
        "alpha    b        lnk      sub\n"
    assert out(inst1, "ls", "-w", "20", "d") == "alpha    b\nlnk      sub\n"
    assert out(inst1, "ls", "d", env={"COLUMNS": "20"}) == "alpha    b\nlnk      sub\n"
    assert out(inst1, "ls", "-1", "-F", "d") == "alpha\nb\nlnk@\nsub.\n"
    assert out(inst1, "ls", "-w", "0", "-F", "d") == "alpha    b        lnk@     sub.\n"
    # -d: the directory itself; a value by name; several directories labelled
    assert out(inst1, "ls", "-d", "-F", "d", "top") == "d.     top\n"
    assert out(inst1, "ls", "-1", "d.sub", "d") == "d.sub:\nx\n\nd:\nalpha\nb\nlnk\nsub\n"
    assert out(inst1, "ls", "-1", "top", "d.sub") == "top\n\nd.sub:\nx\n"
    cp = inst1.cli("kvs", "ls", "nope")
    assert cp.returncode == 1
    assert one_error_line(cp) == "fluxlite kvs ls: nope: No such file or directory"


def test_version_and_sync(inst1):
    before = int(out(inst1, "version"))
    seq = int(out(inst1, "put", "-s", "v=1"))
    assert seq > before and int(out(inst1, "version")) == seq
    assert out(inst1, "sync") == ""


def test_copy_and_move(inst1):
    inst1.cli("kvs", "put", "a.b=1", "a.c.d=[1,2]", "s=x", "z.old=1", check=True)
    inst1.cli("kvs", "put", "log=[]", check=True)
    inst1.cli("kvs", "put", "-A", "log=e1", check=True)   # a list: the item appended
    inst1.cli("kvs", "link", "a.b", "a.lnk", check=True)
    inst1.cli("kvs", "copy", "a", "z", check=True)       # DST replaced, as Flux's
    assert out(inst1, "dir", "-R", "z") == "z.b = 1\nz.c.d = [1, 2]\nz.lnk = 1\n"
    assert out(inst1, "readlink", "z.lnk") == "a.b\n"
    inst1.cli("kvs", "copy", "log", "log2", check=True)  # still a list appends extend
    inst1.cli("kvs", "put", "-A", "log2=e2", check=True)
    assert out(inst1, "get", "log2") == '["e1", "e2"]\n'
    assert out(inst1, "get", "log") == '["e1"]\n'
    inst1.cli("kvs", "move", "s", "t", check=True)
    assert out(inst1, "get", "t") == "x\n"
    assert inst1.cli("kvs", "get", "s").returncode != 0
    inst1.cli("kvs", "namespace", "create", "other", check=True)
    inst1.cli("kvs", "copy", "-D", "other", "a.b", "q", check=True)
    assert out(inst1, "get", "-N", "other", "q") == "1\n"
    cp = inst1.cli("kvs", "copy", "nope", "x")
    assert cp.returncode == 1
    assert one_error_line(cp) == "fluxlite kvs copy: nope: No such file or directory"


def test_root_refs_readlink_dir_and_eventlog_options(inst1):
    seqs = [int(out(inst1, "mkdir", "-s", "d")), int(out(inst1, "link", "-s", "d", "l"))]
    seqs.append(int(out(inst1, "unlink", "-s", "l")))
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    for args in (["mkdir", "-O", "x"], ["link", "-b", "d", "y"], ["unlink", "-O", "d"],
                 ["dir", "-a", "{}", "d"], ["readlink", "-a", "{}", "l"],
                 ["namespace", "create", "-r", "sha1-0", "n"]):
        cp = inst1.cli("kvs", *args)
        assert cp.returncode == 1 and "content store" in one_error_line(cp), args
    inst1.cli("kvs", "namespace", "create", "team", check=True)
    inst1.cli("kvs", "put", "-N", "team", "cfg.n=3", check=True)
    inst1.cli("kvs", "link", "-T", "team", "cfg.n", "ln", check=True)
    assert out(inst1, "readlink", "ln") == "team::cfg.n\n"
    assert out(inst1, "readlink", "-o", "ln") == "team\n"
    assert out(inst1, "readlink", "-k", "ln") == "cfg.n\n"
    assert out(inst1, "dir", "-w", "10", "-N", "team", "-R") == "cfg.n = 3\n"
    inst1.cli("kvs", "eventlog", "append", "log", "first", check=True)
    assert out(inst1, "eventlog", "get", "-L", "-S", "log").split()[1] == "first"
    assert out(inst1, "eventlog", "wait-event", "--color=never", "log", "first").split()[1] \
        == "first"


def test_getroot_prints_the_root_as_flux_does(inst1):
    import json
    import os
    seq = int(out(inst1, "getroot", "-s"))
    assert seq == int(out(inst1, "version"))
    root = json.loads(out(inst1, "getroot"))
    assert root == {"ver": 1, "type": "dirref", "data": [out(inst1, "getroot", "-b").strip()]}
    assert out(inst1, "getroot") == json.dumps(root, sort_keys=True, separators=(",", ":")) + \
        "\n"                                       # Flux's compact, sorted encoding
    assert int(out(inst1, "getroot", "-o")) == os.getuid()
    inst1.cli("kvs", "put", "k=1", check=True)
    assert int(out(inst1, "getroot", "-s")) == seq + 1       # a commit moves the root on
    assert out(inst1, "getroot", "-b") != root["data"][0]
    inst1.cli("kvs", "namespace", "create", "-o", "4242", "other", check=True)
    assert out(inst1, "getroot", "-N", "other", "-o") == "4242\n"
    line = one_error_line(inst1.cli("kvs", "getroot", "-N", "nosuch"))
    assert line.startswith("fluxlite kvs getroot: KVS namespace 'nosuch' does not exist")
    line = one_error_line(inst1.cli("kvs", "getroot", "-s", "-b"))
    assert "at most one of" in line


def test_wait_returns_once_the_version_is_reached(inst1):
    now = int(out(inst1, "version"))
    assert inst1.cli("kvs", "wait", str(now), timeout=30).returncode == 0   # reached: at once
    with inst1.cli_background("kvs", "wait", str(now + 3)) as p:
        for i in range(3):
            assert p.poll() is None      # not before the third commit
            inst1.cli("kvs", "put", f"w{i}=1", check=True)
        assert p.wait(timeout=30) == 0
    line = one_error_line(inst1.cli("kvs", "wait", "soon"))
    assert "'soon' is not a KVS version" in line
    line = one_error_line(inst1.cli("kvs", "wait", "-N", "nosuch", "1"))
    assert "KVS namespace 'nosuch' does not exist" in line


def test_job_namespace_is_the_jobs_guest_directory(inst1):
    jobid = inst1.cli("submit", "echo", "guest", check=True).stdout.strip()
    inst1.cli("job", "wait-event", "-t", "30", jobid, "clean", check=True)
    decimal = inst1.cli("job", "id", jobid, check=True).stdout.strip()
    ns = inst1.cli("job", "namespace", jobid, check=True).stdout.strip()
    assert ns == f"job-{decimal}"                                 # Flux's name
    exec_log = out(inst1, "get", "-N", ns, "exec.eventlog")
    assert exec_log == out(inst1, "get", f"job.{_dothex(inst1, jobid)}.guest.exec.eventlog")
    assert '"name":"done"' in exec_log
    assert out(inst1, "ls", "-N", ns).split() == ["exec", "output"]
    inst1.cli("kvs", "put", "-N", ns, "note=hello", check=True)
    assert out(inst1, "get", f"job.{_dothex(inst1, jobid)}.guest.note") == "hello\n"
    line = one_error_line(inst1.cli("kvs", "get", "-N", "job-12345", "exec.eventlog"))
    assert "KVS namespace 'job-12345' does not exist (no job 12345" in line
    line = one_error_line(inst1.cli("job", "namespace", "notajob"))
    assert "notajob" in line


def test_eventlog_commands_take_a_namespace(inst1):
    """flux-kvs eventlog get|append|wait-event -N NAME, a job's guest namespace too."""
    inst1.cli("kvs", "namespace", "create", "logs", check=True)
    out(inst1, "eventlog", "append", "-N", "logs", "-t", "1.5", "ev", "hello", '{"n":1}')
    out(inst1, "eventlog", "append", "--namespace=logs", "-t", "2.5", "ev", "world")
    assert out(inst1, "eventlog", "get", "-N", "logs", "ev") == \
        "1.500000 hello n=1\n2.500000 world\n"
    assert out(inst1, "eventlog", "get", "-N", "logs", "-u", "-w", "-c", "1", "ev") == \
        '{"timestamp":1.5,"name":"hello","context":{"n":1}}\n'
    assert out(inst1, "eventlog", "wait-event", "-N", "logs", "-q", "-t", "10", "ev",
               "world") == ""
    assert inst1.cli("kvs", "eventlog", "get", "ev").returncode != 0   # not in primary
    jobid = inst1.cli("submit", "true", check=True).stdout.strip()
    inst1.cli("job", "wait-event", "-t", "30", jobid, "clean", check=True)
    ns = inst1.cli("job", "namespace", jobid, check=True).stdout.strip()
    got = out(inst1, "eventlog", "wait-event", "-N", ns, "-t", "10", "-v", "-u",
              "exec.eventlog", "done")
    assert [json.loads(line)["name"] for line in got.splitlines()][-1] == "done"


def test_namespace_list_shows_running_jobs_guest_namespaces(inst1):
    """As Flux's: NAMESPACE, OWNER, FLAGS (0x%08X); job-ID while the job runs."""
    jobid = inst1.cli("submit", "sleep", "300", check=True).stdout.strip()
    inst1.cli("job", "wait-event", "-t", "30", jobid, "start", check=True)
    decimal = inst1.cli("job", "id", jobid, check=True).stdout.strip()
    lines = out(inst1, "namespace", "list").splitlines()
    assert lines[0] == f"{'NAMESPACE':<36}      OWNER      FLAGS"
    assert lines[1] == f"{'primary':<36} {os.getuid():>10} 0x00000000"
    assert lines[2] == f"{'job-' + decimal:<36} {os.getuid():>10} 0x00000000"
    inst1.cli("cancel", jobid, check=True)
    inst1.cli("job", "wait-event", "-t", "30", jobid, "clean", check=True)
    assert len(out(inst1, "namespace", "list").splitlines()) == 2


def _dothex(inst, jobid: str) -> str:
    return inst.cli("job", "id", "--to=dothex", jobid, check=True).stdout.strip()
