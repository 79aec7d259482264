"""How a client reaches an instance by URI, through the real CLI: the tree socket is
no client socket, a socket nobody listens on is refused at once, bad URIs say
what is wrong, a TCP peer that closes is not a lost connection."""

import time

import pytest


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
