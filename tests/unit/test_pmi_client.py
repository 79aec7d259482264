"""The broker-side PMI-1 client (fluxlite/pmi/client.py) against the shell's server
state (fluxlite/pmi/pmi1.py) over real socketpairs: every call, a missing key, a
refused command, a closed connection, and the environment it reads."""

import select
import socket
import threading

import pytest

from fluxlite.pmi import pmi1
from fluxlite.pmi.client import PMI1Client, PMIError, in_environment

pytestmark = pytest.mark.timeout(10)


class Served:
    """A PMI1Server for `size` tasks, driven over socketpairs by a thread."""

    def __init__(self, size: int):
        self.server = pmi1.PMI1Server(kvsname="f3Kv", size=size, ranks=list(range(size)))
        self.ours, self.theirs = {}, {}
        for r in range(size):
            self.ours[r], self.theirs[r] = socket.socketpair()
        self.aborts: list = []
        self.stop_r, self.stop_w = socket.socketpair()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def client(self, rank: int) -> PMI1Client:
        return PMI1Client.from_env({"PMI_FD": str(self.theirs[rank].detach()),
                                    "PMI_RANK": str(rank),
                                    "PMI_SIZE": str(len(self.ours))})

    def _apply(self, effects):
        for e in effects:
            if isinstance(e, pmi1.Answer):
                self.ours[e.rank].sendall(e.data)
            elif isinstance(e, pmi1.Barrier):
                self._apply(self.server.barrier_done(e.keys))
            elif isinstance(e, pmi1.Abort):
                self.aborts.append(e)
            elif isinstance(e, pmi1.Close):
                self.ours[e.rank].close()

    def _loop(self):
        while True:
            live = {s.fileno(): r for r, s in self.ours.items() if s.fileno() >= 0}
            ready, _, _ = select.select(list(live) + [self.stop_r], [], [], 5)
            if self.stop_r in ready:
                return
            for fd in ready:
                rank = live[fd]
                self._apply(self.server.feed(rank, self.ours[rank].recv(65536)))

    def close(self):
        self.stop_w.send(b"x")
        self.thread.join(5)
        for s in list(self.ours.values()) + [self.stop_r, self.stop_w]:
            s.close()


@pytest.fixture
def served():
    made = []

    def make(size):
        made.append(Served(size))
        return made[-1]
    yield make
    for s in made:
        s.close()


def test_exchange_between_two_clients(served):
    s = served(2)
    clients = [s.client(0), s.client(1)]
    got = {}

    def task(c):
        c.init()
        assert c.get_maxes() == {"kvsname_max": 64, "keylen_max": 64, "vallen_max": 1024}
        assert c.get_my_kvsname() == "f3Kv"
        c.put(f"ep.{c.rank}", f"ipc:///tmp/b{c.rank}/tbon")
        c.barrier()
        got[c.rank] = [c.get("ep.0"), c.get("ep.1"), c.get("nobody-put-this")]
        c.finalize()
        c.close()

    threads = [threading.Thread(target=task, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert got == {r: ["ipc:///tmp/b0/tbon", "ipc:///tmp/b1/tbon", None] for r in (0, 1)}
    assert (clients[0].rank, clients[0].size, clients[1].rank) == (0, 2, 1)


def test_refusals_and_abort(served):
    s = served(1)
    c = s.client(0)
    with pytest.raises(PMIError, match="get_maxes failed.*before init"):
        c.get_maxes()
    c.init()
    c.get_my_kvsname()
    with pytest.raises(PMIError, match="key must be"):
        c.put("k" * 100, "v")
    with pytest.raises(PMIError, match="one word"):
        c.put("k", "two words")
    c.abort(7, "giving up now")
    c.barrier()     # the connection still answers; the abort reached the server
    assert [(a.rank, a.code, a.message) for a in s.aborts] == [(0, 7, "giving_up_now")]
    c.close()


def test_closed_connection_is_one_clear_error():
    ours, theirs = socket.socketpair()
    c = PMI1Client(theirs, 0, 1)
    ours.close()
    with pytest.raises(PMIError, match="init"):
        c.init()
    c.close()


def test_environment():
    assert in_environment({"PMI_FD": "5", "PMI_RANK": "0", "PMI_SIZE": "2"})
    assert in_environment({"PMI_PORT": "h:1", "PMI_RANK": "0", "PMI_SIZE": "2"})
    assert not in_environment({"PMI_RANK": "0", "PMI_SIZE": "2"})
    assert not in_environment({"PMI_FD": "5", "PMI_SIZE": "2"})
    with pytest.raises(PMIError, match="PMI_RANK='x' is not a number"):
        PMI1Client.from_env({"PMI_PORT": "localhost:1", "PMI_RANK": "x", "PMI_SIZE": "1"})
    with pytest.raises(PMIError, match="not host:port"):
        PMI1Client.from_env({"PMI_PORT": "nonsense", "PMI_RANK": "0", "PMI_SIZE": "1"})


def test_pmi_port_with_initack():
    """PMI_PORT and PMI_ID: the handshake MPICH's simple client does before init."""
    lsock = socket.create_server(("127.0.0.1", 0))
    port = lsock.getsockname()[1]
    server = pmi1.PMI1Server(kvsname="kv", size=3, ranks=[2])
    seen = []

    def serve():
        conn, _ = lsock.accept()
        f = conn.makefile("rb")
        seen.append(f.readline())
        conn.sendall(b"cmd=initack\ncmd=set size=3\ncmd=set rank=2\ncmd=set debug=0\n")
        for e in server.feed(2, f.readline()):
            conn.sendall(e.data)
        f.close()
        conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    c = PMI1Client.from_env({"PMI_PORT": f"127.0.0.1:{port}", "PMI_ID": "2",
                             "PMI_RANK": "0", "PMI_SIZE": "1"})
    c.init()
    t.join(5)
    assert seen == [b"cmd=initack pmiid=2\n"]
    assert (c.rank, c.size) == (2, 3)
    c.close()
    lsock.close()
