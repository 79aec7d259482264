"""PMI-2 framing: the client's bytes and its reading of a server's, over a real
socketpair, with the server side played by a thread that answers the way Slurm's
pmi2 plugin does (src/plugins/mpi/pmi2/pmi2.c)."""

import os
import socket
import threading

import pytest

from fluxlite.errors import FluxliteError, HostUnreachable, ProtocolError, RPCTimeout, UsageError
from fluxlite.pmi import pmi2
from fluxlite.pmi.pmi2 import PMI2Client


def frame(body: str) -> bytes:
    """A server message as Slurm writes it: "%-6d" then the body."""
    return f"{len(body):<6d}".encode() + body.encode()


class Server(threading.Thread):
    """Reads the client's messages raw and answers from a script; records what came."""

    INIT_REPLY = b"cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n"

    def __init__(self, sock, replies, init_reply=INIT_REPLY):
        super().__init__(daemon=True)
        self.sock, self.replies, self.init_reply = sock, list(replies), init_reply
        self.got: list[bytes] = []
        self.init_line = b""
        self.error = None

    def read_exact(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    def run(self):
        try:
            self.init_line = self.sock.recv(64)   # Slurm reads the init line in one read
            self.sock.sendall(self.init_reply)
            for reply in self.replies:
                length = self.read_exact(6)
                self.got.append(length + self.read_exact(int(length)))
                if reply is not None:
                    self.sock.sendall(reply if isinstance(reply, bytes) else frame(reply))
        except EOFError:
            pass
        except Exception as exc:  # surfaced by the test
            self.error = exc


HANDSHAKE = [
    "cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=1;size=2;appnum=-1;"
    "debugged=FALSE;pmiverbose=FALSE;",
    "cmd=job-getid-response;rc=0;jobid=7.0;",
]


def connect(replies, **kw):
    a, b = socket.socketpair()
    server = Server(b, list(replies), **kw.pop("server", {}))
    server.start()
    return a, b, server


def make_client(replies, **kw):
    a, b, server = connect(HANDSHAKE + list(replies))
    client = PMI2Client(a, jobid="7.0", rank=1, timeout=10, **kw)
    return client, server, b


def test_handshake_bytes_and_attributes():
    client, server, b = make_client([])
    try:
        assert server.init_line == b"cmd=init pmi_version=2 pmi_subversion=0\n"
        assert server.got[0] == frame("cmd=fullinit;pmijobid=7.0;pmirank=1;threaded=FALSE;")
        assert server.got[1] == frame("cmd=job-getid;")
        assert (client.rank, client.size, client.kvsname, client.appnum) == (1, 2, "7.0", -1)
        assert client.spawned is False
    finally:
        client.close()
        b.close()


def test_put_barrier_get_finalize():
    client, server, b = make_client([
        "cmd=kvs-put-response;rc=0;",
        "cmd=kvs-fence-response;rc=0;",
        "cmd=kvs-get-response;rc=0;found=TRUE;value={\"uri\":\"tcp://10.0.0.2:5000\"};",
        "cmd=kvs-get-response;rc=0;found=FALSE;",
        "cmd=info-getjobattr-response;rc=0;found=TRUE;value=(vector,(0,2,1));",
        "cmd=finalize-response;rc=0;",
    ])
    try:
        client.put("card.1", '{"uri":"tcp://10.0.0.3:5000"}')
        client.barrier()
        assert client.get("card.0") == '{"uri":"tcp://10.0.0.2:5000"}'
        assert client.get("nosuch") is None
        assert client.job_attr("PMI_process_mapping") == "(vector,(0,2,1))"
        client.finalize()
        server.join(10)
        assert server.error is None
        assert server.got[2:] == [
            frame('cmd=kvs-put;key=card.1;value={"uri":"tcp://10.0.0.3:5000"};'),
            frame("cmd=kvs-fence;"),
            frame("cmd=kvs-get;jobid=7.0;key=card.0;"),
            frame("cmd=kvs-get;jobid=7.0;key=nosuch;"),
            frame("cmd=info-getjobattr;key=PMI_process_mapping;"),
            frame("cmd=finalize;"),
        ]
        with pytest.raises(UsageError, match="closed"):
            client.get("card.0")
    finally:
        client.close()
        b.close()


def test_abort_sends_isworld_and_closes():
    client, server, b = make_client([None])
    try:
        client.abort(7, "broker 1; cannot bind")
        server.join(10)
        assert server.got[-1] == frame("cmd=abort;isworld=TRUE;exitcode=7;"
                                       "msg=broker 1, cannot bind;")
        with pytest.raises(UsageError):
            client.barrier()
    finally:
        b.close()


def test_a_reply_split_across_reads_is_reassembled():
    body = "cmd=kvs-get-response;rc=0;found=TRUE;value=abc;"
    a, b = socket.socketpair()

    def serve():
        b.recv(64)
        b.sendall(Server.INIT_REPLY[:10])
        b.sendall(Server.INIT_REPLY[10:])
        for reply in HANDSHAKE:
            length = b.recv(6)
            b.recv(int(length), socket.MSG_WAITALL)
            data = frame(reply)
            for i in range(len(data)):      # one byte at a time
                b.send(data[i:i + 1])
        length = b.recv(6)
        b.recv(int(length), socket.MSG_WAITALL)
        b.sendall(frame(body)[:3])
        b.sendall(frame(body)[3:])

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    client = PMI2Client(a, jobid="7.0", rank=1, timeout=10)
    try:
        assert client.get("k") == "abc"
    finally:
        client.close()
        t.join(10)
        b.close()


def test_codec_escapes_and_unescapes_semicolons():
    assert pmi2.encode("kvs-fence") == b"14    cmd=kvs-fence;"   # "%-6d" length, as Slurm
    assert pmi2.encode("kvs-put", [("key", "k"), ("value", "a;b")]) == \
        frame("cmd=kvs-put;key=k;value=a;;b;")
    assert pmi2.decode(b"cmd=x-response;rc=0;value=a;;b;;;next=1;") == \
        ("x-response", {"rc": "0", "value": "a;b;", "next": "1"})


@pytest.mark.parametrize("body,words", [
    (b"rc=0;", "does not start with cmd="),
    (b"cmd=x;rc", "without a value"),
    (b"cmd=x;rc=0", "not ';'-terminated"),
    (b"\xff", "not UTF-8"),
])
def test_decode_rejects_malformed_bodies(body, words):
    with pytest.raises(ProtocolError, match=words):
        pmi2.decode(body)


@pytest.mark.parametrize("reply,error,words", [
    (b"abcdefcmd=x;", ProtocolError, "length field is not a number"),
    (b"999999", ProtocolError, "longer than"),
    ("cmd=kvs-fence-response;rc=0;", ProtocolError, "answered 'kvs-fence-response'"),
    ("cmd=kvs-put-response;rc=5;errmsg=no room;", FluxliteError, "rc=5.*no room"),
])
def test_bad_replies_are_clear_errors(reply, error, words):
    client, server, b = make_client([reply])
    try:
        with pytest.raises(error, match=words):
            client.put("k", "v")
    finally:
        client.close()
        b.close()


def test_server_that_goes_away_or_stalls():
    client, server, b = make_client([])
    server.join(10)
    b.close()
    with pytest.raises(HostUnreachable, match="closed the connection|gone"):
        client.barrier()
    client.close()

    a, b, server = connect(HANDSHAKE + [None])   # takes the fence, never answers
    client = PMI2Client(a, jobid="7.0", rank=1, timeout=0.5)
    try:
        with pytest.raises(RPCTimeout):
            client.barrier()
    finally:
        client.close()
        b.close()


def test_handshake_failures():
    a, b, server = connect([], server={"init_reply": b"cmd=response_to_init rc=-1 "
                                                     b"pmi_version=1 pmi_subversion=1\n"})
    with pytest.raises(ProtocolError, match="refused version 2.0 .*offers 1.1"):
        PMI2Client(a, timeout=10)
    assert a.fileno() == -1      # closed on failure
    b.close()
    a, b, server = connect(["cmd=fullinit-response;rc=0;rank=3;size=2;"])
    with pytest.raises(ProtocolError, match="rank 3 of size 2"):
        PMI2Client(a, timeout=10)
    b.close()
    a, b, server = connect(HANDSHAKE)
    with pytest.raises(ProtocolError, match="PMI_RANK is 0"):
        PMI2Client(a, jobid="7.0", rank=0, timeout=10)
    b.close()


@pytest.mark.parametrize("key,value,words", [
    ("", "v", "1-64 bytes"), ("k" * 65, "v", "1-64 bytes"), ("a=b", "v", "without"),
    ("k", "x" * 1025, "at most 1024"), ("k", "a;b", "may not hold ';'"),
    ("k", "a\nb", "newline"),
])
def test_put_refuses_what_the_wire_cannot_carry(key, value, words):
    client, server, b = make_client([])
    try:
        with pytest.raises(UsageError, match=words):
            client.put(key, value)
    finally:
        client.close()
        b.close()


def test_from_environ():
    assert PMI2Client.from_environ({}) is None
    # PMI-1 launchers (Flux's shell, Hydra) set no PMI_JOBID: not a PMI-2 environment
    assert PMI2Client.from_environ({"PMI_FD": "5", "PMI_RANK": "0", "PMI_SIZE": "1"}) is None
    with pytest.raises(UsageError, match="malformed"):
        PMI2Client.from_environ({"PMI_FD": "x", "PMI_RANK": "0", "PMI_SIZE": "1",
                                 "PMI_JOBID": "1.0"})
    a, b, server = connect(HANDSHAKE)
    fd = os.dup(a.fileno())
    a.close()
    client = PMI2Client.from_environ({"PMI_FD": str(fd), "PMI_RANK": "1", "PMI_SIZE": "2",
                                      "PMI_JOBID": "7.0"}, timeout=10)
    try:
        assert (client.rank, client.size, client.kvsname) == (1, 2, "7.0")
        assert server.got[0] == frame("cmd=fullinit;pmijobid=7.0;pmirank=1;threaded=FALSE;")
    finally:
        client.close()
        b.close()
    with pytest.raises(ProtocolError, match="PMI_SIZE is 4"):
        a, b, server = connect(HANDSHAKE)
        fd = os.dup(a.fileno())
        a.close()
        try:
            PMI2Client.from_environ({"PMI_FD": str(fd), "PMI_RANK": "1", "PMI_SIZE": "4",
                                     "PMI_JOBID": "7.0"}, timeout=10)
        finally:
            b.close()
