"""ZAP ties a key to its rank: the user id it gives a connection names the rank the
key was published for (PMI bootstrap), read back from each message's User-Id; a
shared certificate's key names no rank."""

import asyncio

import pytest
import zmq

from fluxlite.overlay.zap import DOMAIN, ZapHandler
from fluxlite.protocol.frames import recv_frames_auth

pytestmark = pytest.mark.timeout(30)


def test_each_connection_carries_the_rank_of_its_key():
    async def main():
        ctx = zmq.Context()
        server_pub, server_sec = zmq.curve_keypair()
        a_pub, a_sec = zmq.curve_keypair()
        b_pub, b_sec = zmq.curve_keypair()
        zap = ZapHandler(ctx, {a_pub: 3, b_pub: None})
        srv = ctx.socket(zmq.ROUTER)
        srv.setsockopt(zmq.LINGER, 0)
        srv.setsockopt(zmq.ZAP_DOMAIN, DOMAIN)
        srv.setsockopt(zmq.CURVE_SERVER, 1)
        srv.setsockopt(zmq.CURVE_PUBLICKEY, server_pub)
        srv.setsockopt(zmq.CURVE_SECRETKEY, server_sec)
        port = srv.bind_to_random_port("tcp://127.0.0.1")
        users = {}
        clients = []
        try:
            for name, pub, sec in (("a", a_pub, a_sec), ("b", b_pub, b_sec)):
                c = ctx.socket(zmq.DEALER)
                c.setsockopt(zmq.LINGER, 0)
                c.setsockopt(zmq.CURVE_SERVERKEY, server_pub)
                c.setsockopt(zmq.CURVE_PUBLICKEY, pub)
                c.setsockopt(zmq.CURVE_SECRETKEY, sec)
                c.connect(f"tcp://127.0.0.1:{port}")
                c.send(name.encode())
                clients.append(c)
            loop = asyncio.get_running_loop()
            for _ in range(2):
                # the server socket is only polled there; ZAP answers on this loop
                assert await loop.run_in_executor(None, srv.poll, 10000)
                frames, _, _, user = recv_frames_auth(srv)
                users[frames[1].decode()] = user
        finally:
            for c in clients:
                c.close()
            srv.close()
            zap.close()
            ctx.term()
        return users

    assert asyncio.run(main()) == {"a": "rank:3", "b": "broker"}
