"""More rough edges a Flux user hits, through the real CLI: ping until stopped
and RANK!SERVICE targets, dmesg -H/-f, kvs unlink/dir/ls -R, shutdown and proxy
by job id, uri --local."""

import signal

import pytest

from fluxlite.testing import _readline

pytestmark = pytest.mark.timeout(120)


def lines_of(proc, n, timeout=30):
    """The next n lines `proc` prints (bounded wait for each)."""
    out = []
    for _ in range(n):
        line = _readline(proc.stdout, timeout)
        assert line, f"no line within {timeout}s after {out!r}"
        out.append(line.rstrip("\n"))
    return out


def interrupt(proc, timeout=30):
    proc.send_signal(signal.SIGINT)
    rc = proc.wait(timeout)
    return rc, proc.stderr.read()


# ------------------------------------------------------------------ ping
@pytest.mark.parametrize("target,prefix", [
    ("1", "1!broker.ping"), ("1!broker", "1!broker.ping"), ("1!kvs", None),
    ("kvs", "0!kvs.ping"), ("any!broker", "broker.ping"),
])
def test_ping_count_and_targets(inst4, target, prefix):
    cp = inst4.cli("ping", "-c", "3", "-i", "0", target)
    if prefix is None:  # kvs runs on rank 0 only
        assert cp.returncode != 0 and len(cp.stderr.splitlines()) == 1, cp.stderr
        assert "kvs.ping" in cp.stderr
        return
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    assert len(lines) == 3
    for seq, line in enumerate(lines):
        assert prefix in line and f" pad=0 seq={seq} time=" in line and line.endswith(")")


def test_ping_repeats_until_interrupted(inst4):
    with inst4.cli_background("ping", "-i", "0.05", "2!broker") as p:
        lines = lines_of(p, 4)
        rc, err = interrupt(p)
    assert rc == 0 and err == ""
    assert [ln.split(" seq=")[1].split()[0] for ln in lines] == ["0", "1", "2", "3"]
    assert all(ln.startswith("2!broker.ping pad=0 ") for ln in lines)


@pytest.mark.parametrize("args,said", [
    (("x!broker",), "expected RANK!SERVICE"),
    (("1!",), "no service after '!'"),
    (("-r", "1", "2!broker"), "give one"),
    (("-c", "-1", "0"), "-1"),
])
def test_ping_bad_targets(inst1, args, said):
    cp = inst1.cli("ping", *args)
    assert cp.returncode != 0 and cp.stdout == ""
    assert len(cp.stderr.splitlines()) == 1 and said in cp.stderr, cp.stderr


# ------------------------------------------------------------------ dmesg
def test_dmesg_human_times(inst1):
    lines = inst1.cli("dmesg", "-H", check=True).stdout.splitlines()
    import re
    assert re.match(r"^\[[A-Z][a-z]{2}\d\d \d\d:\d\d\] broker\.info\[0\]: ", lines[0]), lines[0]
    assert any(re.match(r"^\[ *\+\d+\.\d{6}\] \w", ln) for ln in lines[1:]), lines
    delta = inst1.cli("dmesg", "-H", "-d", check=True).stdout.splitlines()
    assert len(delta) >= len(lines)


def test_dmesg_follow_prints_new_entries_until_interrupted(inst1):
    with inst1.cli_background("dmesg", "--follow") as p:
        backlog = lines_of(p, 1)
        assert "broker.info[0]" in backlog[0]
        inst1.cli("setattr", "exec.kill-timeout", "7s", check=True)
        seen = []
        while not any("attribute set" in ln and "7s" in ln for ln in seen):
            seen += lines_of(p, 1)
        rc, err = interrupt(p)
    assert rc == 0 and err == ""


def test_dmesg_new_follows_only_new_entries(inst4):
    inst4.cli("setattr", "-r", "2", "exec.kill-timeout", "9s", check=True)  # in the ring
    with inst4.cli_background("dmesg", "-n", "-r", "2") as p:
        # the stream starts an instant after the command does: log until it shows
        line = ""
        for n in range(1, 30):
            inst4.cli("setattr", "-r", "2", "exec.kill-timeout", f"{n}s", check=True)
            line = _readline(p.stdout, 1.0)
            if line:
                break
        assert "attribute set" in line and "[2]" in line and "9s" not in line, line
        rc, _ = interrupt(p)
    assert rc == 0


@pytest.mark.parametrize("args,said", [
    (("-d",), "--delta needs --human"),
    (("-H", "--json"), "do not go together"),
    (("-C", "-f"), "--clear does not go with --follow"),
])
def test_dmesg_bad_options(inst1, args, said):
    cp = inst1.cli("dmesg", *args)
    assert cp.returncode != 0 and cp.stdout == ""
    assert len(cp.stderr.splitlines()) == 1 and said in cp.stderr, cp.stderr


# ------------------------------------------------------------------ kvs
@pytest.fixture
def tree(inst1):
    inst1.cli("kvs", "put", "a.b=1", "a.c.d=hello", "a.c.e.f=[1,2]", "top=x", check=True)
    return inst1


def test_kvs_ls_recursive_as_ls_R(tree):
    out = tree.cli("kvs", "ls", "-R", "a", check=True).stdout
    assert out == "a:\nb\nc.\n\na.c:\nd\ne.\n\na.c.e:\nf\n"
    root = tree.cli("kvs", "ls", "-R", check=True).stdout
    assert root.startswith(".:\na.\n") and "\n\na.c.e:\nf\n" in root
    assert tree.cli("kvs", "ls", "a", check=True).stdout == "b\nc.\n"


def test_kvs_dir_prints_keys_and_values(tree):
    assert tree.cli("kvs", "dir", "a", check=True).stdout == "a.b = 1\na.c.\n"
    assert tree.cli("kvs", "dir", "-R", "a", check=True).stdout == \
        "a.b = 1\na.c.d = hello\na.c.e.f = [1, 2]\n"
    assert tree.cli("kvs", "dir", "-R", "-d", "a.c", check=True).stdout == "a.c.d\na.c.e.f\n"
    assert "top = x\n" in tree.cli("kvs", "dir", check=True).stdout


def test_kvs_unlink(tree):
    cp = tree.cli("kvs", "unlink", "a")
    assert cp.returncode == 1 and cp.stdout == ""
    assert cp.stderr == "fluxlite kvs unlink: cannot unlink 'a': it is a non-empty directory " \
        "(use -R)\n"
    tree.cli("kvs", "unlink", "a.c.d", "top", check=True)
    assert tree.cli("kvs", "get", "top").returncode != 0
    tree.cli("kvs", "unlink", "-R", "a.c", check=True)
    assert tree.cli("kvs", "ls", "-R", "a", check=True).stdout == "a:\nb\n"
    tree.cli("kvs", "put", "empty.x=1", check=True)
    tree.cli("kvs", "unlink", "empty.x", check=True)
    tree.cli("kvs", "unlink", "empty", check=True)  # an empty directory needs no -R
    assert "empty" not in tree.cli("kvs", "ls", check=True).stdout
    tree.cli("kvs", "unlink", "-f", "nope", check=True)


@pytest.mark.parametrize("args,said", [
    (("unlink", "nope"), "cannot unlink 'nope': no such key"),
    (("unlink", "."), "cannot unlink the root directory"),
    (("unlink", "top", "a"), "non-empty directory"),
    (("dir", "top"), "'top' is not a directory"),
    (("dir", "nope"), "directory 'nope' not found"),
    (("ls", "-R", "top"), "'top' is not a directory: it holds a value (read it with kvs get)"),
    (("get", "a.c"), "key 'a.c' is a directory, not a value: read a key below it (a.c.NAME)"),
    (("put", "-a", "a.c=1"), "key 'a.c' is a directory: cannot append to it (append to a "
                             "key below it, a.c.NAME, or set a value over it)"),
])
def test_kvs_bad_input(tree, args, said):
    cp = tree.cli("kvs", *args)
    assert cp.returncode != 0 and cp.stdout == ""
    assert len(cp.stderr.splitlines()) == 1 and said in cp.stderr, cp.stderr
    assert tree.cli("kvs", "get", "top", check=True).stdout == "x\n"  # all or nothing


# ------------------------------------------------- uri --local, proxy, shutdown
def nested(inst):
    from fluxlite.testing import jobid_of
    from fluxlite.util import fluid
    return fluid.f58(jobid_of(inst.cli("alloc", "-N1", "--bg", timeout=60)))


def wait_inactive(inst, f58):
    cp = inst.cli("job", "wait", f58, timeout=60)
    assert cp.returncode == 0, cp.stderr
    state = inst.cli("jobs", "-a", "-no", "{id} {state}", check=True).stdout
    assert f"{f58} INACTIVE" in state, state


def test_uri_local_forms(inst4):
    f58 = nested(inst4)
    uri = inst4.cli("uri", f58, check=True).stdout.strip()
    assert uri.startswith("local://")
    for args in (("--local", f58), (f58 + "?local",), ("jobid:" + f58,), ("--local", uri)):
        assert inst4.cli("uri", *args, check=True).stdout.strip() == uri, args
    ipc = "ipc://" + uri[len("local://"):]
    assert inst4.cli("uri", "--local", ipc, check=True).stdout.strip() == uri
    assert inst4.cli("uri", ipc, check=True).stdout.strip() == ipc
    inst4.cli("shutdown", f58, check=True)
    wait_inactive(inst4, f58)


def test_uri_of_a_nested_nested_instance(inst4):
    outer = nested(inst4)
    env = {"FLUXLITE_URI": inst4.cli("uri", outer, check=True).stdout.strip()}
    inner = inst4.cli("alloc", "-N1", "--bg", env=env, timeout=60)
    assert inner.returncode == 0, inner.stderr
    inner_id = inner.stdout.strip()
    uri = inst4.cli("uri", f"{outer}/{inner_id}", check=True).stdout.strip()
    assert inst4.cli("proxy", uri, "fluxlite", "getattr", "instance-level",
                     check=True).stdout.strip() == "2"
    assert inst4.cli("proxy", f"jobid:{outer}/{inner_id}", "fluxlite", "getattr", "jobid",
                     check=True).stdout.strip() == inner_id
    inst4.cli("shutdown", f"{outer}/{inner_id}", check=True)
    inst4.cli("shutdown", outer, check=True)
    wait_inactive(inst4, outer)


def test_shutdown_jobid_ends_that_instance_only(inst4):
    f58 = nested(inst4)
    inst4.cli("shutdown", "--reason", "done with it", f58, check=True)
    wait_inactive(inst4, f58)
    assert inst4.cli("getattr", "size", check=True).stdout.strip() == "4"
    cp = inst4.cli("shutdown", f58)
    assert cp.returncode != 0 and "no longer running" in cp.stderr
    assert len(cp.stderr.splitlines()) == 1


def test_proxy_by_uri_and_by_jobid(inst4):
    f58 = nested(inst4)
    uri = inst4.cli("uri", f58, check=True).stdout.strip()
    assert inst4.cli("proxy", uri, "fluxlite", "getattr", "jobid",
                     check=True).stdout.strip() == f58
    assert inst4.cli("proxy", inst4.uri, "sh", "-c", "exit 5").returncode == 5
    shell = inst4.cli("proxy", f58, input="fluxlite getattr jobid\n",
                      env={"SHELL": "/bin/sh"}, check=True)
    assert shell.stdout.strip() == f58
    inst4.cli("shutdown", f58, check=True)
    wait_inactive(inst4, f58)


def test_proxy_says_when_the_instance_goes_away(inst4):
    f58 = nested(inst4)
    with inst4.cli_background("proxy", f58, "sh", "-c", "echo ready; exec sleep 300") as p:
        assert lines_of(p, 1) == ["ready"]
        inst4.cli("shutdown", f58, check=True)
        rc = p.wait(60)
        err = p.stderr.read()
    assert rc == 1, err
    assert err.startswith("fluxlite proxy: lost connection to local://"), err
    assert len(err.splitlines()) == 1
    wait_inactive(inst4, f58)


def test_proxy_command_that_ends_its_instance_keeps_its_own_status(inst4):
    """A COMMAND that shuts its instance down and then ends by itself (within
    proxy's grace) is not told the connection was lost: proxy exits with its status."""
    f58 = nested(inst4)
    cp = inst4.cli("proxy", f58, "sh", "-c", "fluxlite shutdown; sleep 0.3; echo done; exit 3",
                   timeout=60)
    assert cp.returncode == 3, cp.stderr
    assert cp.stdout.strip().splitlines()[-1] == "done"
    assert "lost connection" not in cp.stderr, cp.stderr
    wait_inactive(inst4, f58)


@pytest.mark.parametrize("args,said", [
    (("uri", "foo:bar"), "unsupported target 'foo:bar'"),
    (("uri", "ƒ1"), "unknown job"),
    (("uri", "?local"), "empty target"),
    (("proxy", "ƒ1", "true"), "unknown job"),
    (("proxy", "local:///nonexistent/local-0", "true"), "no instance"),
    (("shutdown", "jobid:nope"), "error parsing jobid"),
])
def test_target_bad_input(inst1, args, said):
    cp = inst1.cli(*args)
    assert cp.returncode != 0 and cp.stdout == ""
    assert len(cp.stderr.splitlines()) == 1 and said in cp.stderr, cp.stderr


def test_uri_of_a_job_that_is_not_an_instance(inst1):
    from fluxlite.testing import jobid_of
    from fluxlite.util import fluid
    f58 = fluid.f58(jobid_of(inst1.cli("submit", "sleep", "300", check=True)))
    for args in (("uri", f58), ("proxy", f58, "true"), ("shutdown", f58)):
        cp = inst1.cli(*args)
        assert cp.returncode != 0 and "is not an instance" in cp.stderr, cp.stderr
    inst1.cli("cancel", f58, check=True)


# ------------------------------------------------------- the guide's section 9
# flux(1)'s commands, from flux-core's doc/man1
FLUX_COMMANDS = """alloc archive batch broker bulksubmit cancel config content cron dmesg dump
env event exec filemap fsck getattr hostlist housekeeping hwloc job jobs jobtap keygen
kvs logger mini modprobe module multi-prog overlay pgrep ping pmi proxy pstree python
queue resource restore run shutdown sproc start startlog submit top update uptime uri
version watch""".split()


def test_guide_names_every_flux_command_fluxlite_lacks():
    import pathlib

    from fluxlite.cli import COMMANDS
    guide = pathlib.Path(__file__).resolve().parents[2] / "docs" / "guide.md"
    text = guide.read_text()
    section = text[text.index("## 9. Differences from Flux"):
                   text.index("## 10. Flux compatibility")]
    missing = [c for c in FLUX_COMMANDS if c not in COMMANDS and f"`{c}`" not in section
               and f"`{c}`/" not in section and f"/`{c}`" not in section]
    assert missing == [], f"section 9 does not say these Flux commands are absent: {missing}"
    assert "PMIx" in section and "PMI-2" in section and "JournalConsumer" in section
    assert "backfill" in section and "flux-sched" in section and "`job wait`" in section
