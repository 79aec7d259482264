"""Descriptor exhaustion: connections that never speak, local (any owner process) or
over TCP (no key needed), must not take a broker's last descriptors.  Each broker
runs under the usual limit of 1,024 (soft and hard, set with prlimit once it is up):
1,100 silent connections would exhaust it and make libzmq abort the broker."""

import os
import resource
import socket
import subprocess

import pytest
from tcpconf import local_tcp_config, tcp_brokers

from fluxlite.testing import fluxlite_command

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


def test_silent_tcp_connections_leave_rank0_serving(tmp_path):
    conf, port, _ = local_tcp_config(tmp_path)
    with tcp_brokers(tmp_path, conf, args=["-Sbroker.quorum-timeout=0.5s"]) as (env, procs):
        pid = procs["node0"].pid
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (LIMIT, LIMIT))
        held = []
        try:
            for _ in range(SILENT):
                try:
                    held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
                except OSError:
                    pass     # refused or reset: the broker is free to say no
            still_serves(env, pid)
        finally:
            for s in held:
                s.close()
        still_serves(env, pid)
        assert procs["node0"].poll() is None
