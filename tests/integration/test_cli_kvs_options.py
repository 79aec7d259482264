"""flux-kvs's get (-r, -t, -l, -W, -w with -c, -u and -A, -f, -S, -a), put (-t, -s,
-S, -O, -b) and ls (columns, -1, -w, -F, -d, several keys) options, through the
real CLI."""

from __future__ import annotations

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
    cp = inst1.cli("kvs", "get", "-c", "2", "n")
    assert cp.returncode == 1 and "go with --watch" in one_error_line(cp)


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
    inst1.cli("kvs", "put", "-A", "log=a", check=True)   # a list here: items appended
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
    inst1.cli("kvs", "put", "-A", "log=e1", check=True)
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
