"""Rank identity over TCP: a holder of the shared certificate who says hello as a
rank that is online is refused; the real rank stays and runs jobs (it used to be
evicted: the real rank exited and its jobs failed)."""

import subprocess

import pytest
import zmq
from tcpconf import FL, local_tcp_config, tcp_brokers

from fluxlite.client.sync import Handle
from fluxlite.protocol import message as m
from fluxlite.util import curve, idset

pytestmark = pytest.mark.timeout(180)


def online(h, rank, timeout=60):
    for snap in h.stream("overlay.watch", nodeid=0, timeout=timeout):
        if rank in idset.decode(snap["ranks"].get("online", "")):
            return snap
    raise AssertionError(f"rank {rank} never online")


def test_a_second_hello_for_an_online_rank_is_refused(tmp_path):
    conf, port, cert_path = local_tcp_config(tmp_path)
    cert = curve.load_certificate(cert_path)
    with tcp_brokers(tmp_path, conf, hosts=("node0", "node1")) as (env, procs):
        h = Handle(env["FLUXLITE_URI"])
        try:
            online(h, 1)
            ctx = zmq.Context()
            s = ctx.socket(zmq.DEALER)
            s.setsockopt(zmq.LINGER, 0)
            s.setsockopt(zmq.CURVE_SERVERKEY, cert.public)
            s.setsockopt(zmq.CURVE_PUBLICKEY, cert.public)
            s.setsockopt(zmq.CURVE_SECRETKEY, cert.secret)
            s.connect(f"tcp://127.0.0.1:{port}")
            try:
                s.send_multipart(m.encode(m.Message.control(
                    "hello", {"version": m.PROTOCOL_VERSION, "rank": 1, "pid": 1})))
                assert s.poll(30000), "no answer to the hello"
                answer = m.decode(s.recv_multipart())
            finally:
                s.close()
                ctx.term()
            assert answer.topic == "disconnect", answer.topic
            assert "rank 1 is online on another connection" in answer.payload["reason"]
            assert procs["node1"].poll() is None              # the real rank 1 lives on
            cp = subprocess.run(FL + ["run", "-N2", "hostname"], env=env, capture_output=True,
                                text=True, timeout=60, stdin=subprocess.DEVNULL)
            assert cp.returncode == 0 and len(cp.stdout.split()) == 2, cp.stderr
        finally:
            h.close()
