"""Rough edges a Flux user hits first, through the real CLI: bare groups print
their help, suggestions that exist, URIs that are no client socket, and
submission options read as Flux reads them."""

import subprocess
import time

import pytest

from fluxlite.testing import fluxlite_command


def bare(*args, env=None):
    return subprocess.run([*fluxlite_command(), *args], capture_output=True, text=True,
                          timeout=60, env=env)


@pytest.mark.parametrize("group", [(), ("job",), ("resource",), ("kvs",), ("overlay",)])
def test_bare_group_prints_its_help_as_click_does(group):
    cp = bare(*group)
    assert cp.returncode == 2 and cp.stdout == ""
    lines = cp.stderr.splitlines()
    assert lines[0] == f"Usage: {' '.join(('fluxlite',) + group)} [OPTIONS] COMMAND [ARGS]..."
    assert "Commands:" in lines and cp.stderr.endswith("\n")


@pytest.mark.parametrize("args,said", [
    (("resource", "list", "-o", "rlist"), "named formats: default; or a format string"),
    (("jobs", "-o", "rlist"), "named formats: "),   # deps is one of them, as in Flux
    (("jobs", "-o", "nnodes"), "Did you mean '{nnodes}'?"),
    (("resource", "status", "-o", "lng"), "Did you mean 'long'?"),
    (("resource", "status", "-o", "reasn"), "Did you mean '{reason}'?"),
])
def test_format_suggestions_point_to_something_that_exists(inst1, args, said):
    cp = inst1.cli(*args)
    assert cp.returncode != 0 and cp.stdout == ""
    assert len(cp.stderr.splitlines()) == 1 and said in cp.stderr, cp.stderr
    assert "'{rlist}'" not in cp.stderr


# ------------------------------------------------------------------ URIs
def client_error(inst, uri, *cmd):
    cp = inst.cli(*(cmd or ("jobs",)), env={"FLUXLITE_URI": uri}, timeout=20)
    assert cp.returncode != 0 and cp.stdout == ""
    assert len(cp.stderr.splitlines()) == 1, cp.stderr
    return cp.stderr


@pytest.mark.parametrize("cmd", [("jobs",), ("submit", "true"), ("kvs", "get", "x")])
def test_tree_socket_is_not_a_client_socket(inst4, cmd):
    endpoint = inst4.cli("getattr", "tbon.endpoint", check=True).stdout.strip()
    assert endpoint.startswith("ipc://") and endpoint.endswith("/tbon-0")
    for uri in (endpoint, "local://" + endpoint[len("ipc://"):]):
        assert "is not a local (client) socket" in client_error(inst4, uri, *cmd)


def test_tree_socket_under_another_name_is_refused_within_a_bound(inst4, tmp_path):
    # whatever its name, the broker refuses a client on its tree socket at once
    endpoint = inst4.cli("getattr", "tbon.endpoint", check=True).stdout.strip()
    link = tmp_path / "sock"
    link.symlink_to(endpoint[len("ipc://"):])
    err = client_error(inst4, f"local://{link}")
    assert "is not a local (client) socket" in err and "refused" in err, err


def test_socket_nobody_listens_on_is_refused_at_once(inst1, tmp_path):
    import socket
    path = tmp_path / "local-0"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()  # the socket file stays, as after a broker killed with SIGKILL
    t0 = time.monotonic()
    err = client_error(inst1, f"local://{path}")
    assert time.monotonic() - t0 < 5  # not the 5 s send timeout
    assert f"no instance at local://{path}: Connection refused (has it exited?)" in err, err


@pytest.mark.parametrize("uri,said", [
    ("local://", "invalid URI 'local://': no socket path"),
    ("ipc://", "invalid URI 'ipc://': no socket path"),
    ("tcp://", "invalid URI 'tcp://': expected tcp://HOST:PORT"),
    ("tcp://127.0.0.1:1", "no instance answering at tcp://127.0.0.1:1"),
])
def test_bad_uris_say_what_is_wrong(inst1, uri, said):
    err = client_error(inst1, uri)
    assert said in err and "lost" not in err, err


def test_tcp_peer_that_closes_is_not_a_lost_connection(inst1):
    import socket
    import threading
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    stop = threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except OSError:
                continue
            c.close()
    t = threading.Thread(target=accept)
    t.start()
    try:
        err = client_error(inst1, f"tcp://127.0.0.1:{srv.getsockname()[1]}")
    finally:
        stop.set()
        t.join(5)
        srv.close()
    assert "no instance answering" in err and "lost" not in err, err


# ------------------------------------------------------------ options
def test_start_cores_per_rank_0_is_all_cores():
    cp = subprocess.run([*fluxlite_command(), "start", "--cores-per-rank", "0",
                         "fluxlite", "getattr", "resource.cores-per-rank"],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.strip() == "0"


def test_run_input_ranks_sends_stdin_to_those_tasks_only(inst4):
    cp = inst4.cli("run", "-n4", "--input=0,2", "--label-io", "sh", "-c",
                   'printf "%s:" "$FLUXLITE_TASK_RANK"; cat; echo', input="hello",
                   check=True)
    assert sorted(cp.stdout.splitlines()) == ["0: 0:hello", "1: 1:", "2: 2:hello", "3: 3:"]


def test_run_input_file_named_like_a_rank_is_given_as_a_path(inst1, tmp_path):
    (tmp_path / "0").write_text("from the file\n")
    cp = inst1.cli("run", "--cwd", str(tmp_path), f"--input={tmp_path}/0", "cat", check=True)
    assert cp.stdout == "from the file\n"


# ---------------------------------------------------------------- --env
def job_env(inst, *opts, env=None):
    cp = inst.cli("run", *opts, "env", env=env)
    assert cp.returncode == 0, cp.stderr
    return dict(line.split("=", 1) for line in cp.stdout.splitlines() if "=" in line)


def test_env_rules_as_flux(inst1):
    base = {"OMP_A": "1", "OMP_B": "2", "KEEP": "k"}
    got = job_env(inst1, "--env=-*", "--env=/^OMP_/", "--env=PATH", "--env=X=${KEEP}/$$",
                  env=base)
    assert {k: got[k] for k in ("OMP_A", "OMP_B", "X")} == {"OMP_A": "1", "OMP_B": "2",
                                                           "X": "k/$"}
    assert "KEEP" not in got and "PATH" in got
    got = job_env(inst1, "--env=-/^OMP_(A|Z)$/", env=base)
    assert "OMP_A" not in got and got["OMP_B"] == "2"
    # a pattern that matches nothing is a no-op, as in Flux
    assert "NOSUCH" not in job_env(inst1, "--env=NOSUCH*")


def test_env_rules_from_a_file(inst1, tmp_path):
    rules = tmp_path / "envfile"
    rules.write_text("-*\nPATH\nOMP*\nFOO=bar\nBAR=${FOO}/baz\n")
    for opt in (f"--env=^{rules}", f"--env-file={rules}"):
        got = job_env(inst1, opt, env={"OMP_X": "x", "OTHER": "o"})
        assert {k: got.get(k) for k in ("OMP_X", "FOO", "BAR", "OTHER")} == \
            {"OMP_X": "x", "FOO": "bar", "BAR": "bar/baz", "OTHER": None}


@pytest.mark.parametrize("rule,said", [
    ("^/nonexistent/envfile", "--env ^/nonexistent/envfile: cannot read"),
    ("X=$NOT_SET_ANYWHERE", "$NOT_SET_ANYWHERE is not set"),
    ("-/[/", "invalid regex"),
])
def test_bad_env_rules_are_one_line(inst1, rule, said):
    cp = inst1.cli("submit", f"--env={rule}", "true")
    assert cp.returncode != 0 and cp.stdout == ""
    assert len(cp.stderr.splitlines()) == 1 and said in cp.stderr, cp.stderr
