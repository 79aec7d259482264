"""Descriptor exhaustion: connections that never speak, local (any owner process) or
over TCP (no key needed), must not take a broker's last descriptors.  Each broker
runs under the usual limit of 1,024 (soft and hard, set with prlimit once it is up):
1,100 silent connections would exhaust it and make libzmq abort the broker."""

import os
import resource
import socket
import subprocess
import uuid

import pytest

from fluxlite.testing import TAG_VAR, _readline, assert_no_leaks, fluxlite_command

pytestmark = pytest.mark.timeout(180)

FL = fluxlite_command()
SILENT = 1100
LIMIT = 1024


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def still_serves(env, pid, cores=1):
    """Rank 0 answers ping and runs a job, and holds fewer descriptors than its limit."""
    cp = subprocess.run(FL + ["ping", "-c", "1", "0"], env=env, capture_output=True,
                        text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert cp.returncode == 0, cp.stderr
    cp = subprocess.run(FL + ["run", "-n", "1", "echo", "ran"], env=env, capture_output=True,
                        text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert cp.returncode == 0 and cp.stdout == "ran\n", cp.stderr
    assert open_fds(pid) < LIMIT


def test_silent_local_connections_leave_rank0_serving(instance_factory):
    inst = instance_factory(1)
    pid = inst.broker_pid(0)
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (LIMIT, LIMIT))
    path = inst.uri[len("local://"):]
    held = []
    try:
        for _ in range(SILENT):
            u = socket.socket(socket.AF_UNIX)
            u.connect(path)
            held.append(u)
        still_serves(inst.env, pid)
    finally:
        for u in held:
            u.close()
    # and it recovers when they go
    still_serves(inst.env, pid)


def local_tcp_config(tmp_path):
    cert = tmp_path / "curve.cert"
    subprocess.run(FL + ["keygen", str(cert)], check=True, timeout=60, capture_output=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = tmp_path / "conf.toml"
    conf.write_text(f"""[bootstrap]
curve_cert = "{cert}"
default_port = {port}
default_bind = "tcp://127.0.0.1:%p"
default_connect = "tcp://127.0.0.1:%p"
hosts = [{{host = "node0"}}, {{host = "node1"}}]
""")
    return str(conf), port


def test_silent_tcp_connections_leave_rank0_serving(tmp_path):
    conf, port = local_tcp_config(tmp_path)
    tag = uuid.uuid4().hex
    env = dict(os.environ, **{TAG_VAR: tag})
    env.pop("FLUXLITE_URI", None)
    p = subprocess.Popen(FL + ["broker", "--config-path", conf, "--hostname", "node0",
                               "--rundir", str(tmp_path / "rd"), "-Sbroker.quorum-timeout=0.5s",
                               "sh", "-c", 'echo "$FLUXLITE_URI"; exec cat >/dev/null'],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env)
    held = []
    try:
        uri = _readline(p.stdout, 60).strip()
        assert uri.startswith("local://"), p.stderr.read1().decode(errors="replace")
        env["FLUXLITE_URI"] = uri
        pid = p.pid
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (LIMIT, LIMIT))
        for _ in range(SILENT):
            try:
                held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            except OSError:
                pass     # refused or reset: the broker is free to say no
        still_serves(env, pid)
        for s in held:
            s.close()
        held.clear()
        still_serves(env, pid)
    finally:
        for s in held:
            s.close()
        p.stdin.close()
        rc = p.wait(60)
        p.stdout.close()
        p.stderr.close()
        assert_no_leaks(tag)
    assert rc == 0
