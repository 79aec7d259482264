"""`fluxlite keygen` and CURVE: an owner-only certificate, and ZAP that lets in only
the peers that hold it, over real TCP sockets on loopback."""

import os
import stat
import subprocess

import pytest
import zmq
import zmq.auth.thread
from zmq.utils.monitor import recv_monitor_message

from fluxlite.errors import FluxliteError
from fluxlite.testing import fluxlite_command, missing_prerequisite
from fluxlite.util import curve


def keygen(*args, umask=0o022):
    return subprocess.run(["sh", "-c", f"umask {umask:03o}; exec \"$@\"", "sh",
                           *fluxlite_command(), "keygen", *args],
                          capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o277])
def test_keygen_writes_an_owner_only_certificate_whatever_the_umask(tmp_path, umask):
    path = tmp_path / "curve.cert"
    cp = keygen(str(path), umask=umask)
    assert cp.returncode == 0, cp.stderr
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    cert = curve.load_certificate(str(path))
    assert len(cert.public) == len(cert.secret) == 40
    assert zmq.curve_public(cert.secret) == cert.public
    text = path.read_text()
    assert "metadata\n" in text and "curve\n" in text and "secret-key" in text
    assert [p.name for p in tmp_path.iterdir()] == ["curve.cert"]   # no temporary left


def test_keygen_refuses_to_overwrite_without_force(tmp_path):
    path = tmp_path / "curve.cert"
    assert keygen(str(path)).returncode == 0
    before = path.read_bytes()
    cp = keygen(str(path))
    assert cp.returncode == 1
    assert cp.stderr == f"fluxlite keygen: {path} exists; not overwriting it (use --force " \
                        "to replace it)\n"
    assert path.read_bytes() == before
    cp = keygen("--force", "--name", "cluster-a", str(path))
    assert cp.returncode == 0, cp.stderr
    assert path.read_bytes() != before
    assert 'name = "cluster-a"' in path.read_text()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_keygen_into_a_missing_directory_is_one_line(tmp_path):
    cp = keygen(str(tmp_path / "no" / "such.cert"))
    assert cp.returncode == 1
    assert cp.stderr.count("\n") == 1 and "No such file or directory" in cp.stderr


def test_loader_refuses_files_others_can_read(tmp_path):
    path = str(tmp_path / "c.cert")
    curve.write_certificate(path, curve.generate())
    for mode in (0o644, 0o640, 0o604, 0o660):
        os.chmod(path, mode)
        with pytest.raises(FluxliteError, match=f"mode {mode:04o}: others may read it") as e:
            curve.load_certificate(path)
        assert e.value.errname == "EPERM"
    os.chmod(path, 0o400)
    assert curve.load_certificate(path).public


def test_loader_refuses_a_file_another_user_owns(tmp_path):
    if os.geteuid() != 0:
        missing_prerequisite("needs root to give a file to another user (run as root)")
    path = str(tmp_path / "c.cert")
    curve.write_certificate(path, curve.generate())
    os.chown(path, 65534, 65534)
    with pytest.raises(FluxliteError, match="owned by uid 65534"):
        curve.load_certificate(path)


@pytest.mark.parametrize("text,words", [
    ("", "is not a CURVE secret certificate"),
    ('curve\n    public-key = "{}"\n'.format("a" * 40), "is not a CURVE secret certificate"),
    ('curve\n    public-key = "{}"\n    secret-key = "{}"\n'.format("a" * 40, "b" * 40),
     "does not belong"),
])
def test_loader_refuses_what_is_not_a_secret_certificate(tmp_path, text, words):
    path = tmp_path / "c.cert"
    path.write_text(text)
    os.chmod(path, 0o600)
    with pytest.raises(FluxliteError, match=words):
        curve.load_certificate(str(path))


def test_loader_names_a_missing_file(tmp_path):
    with pytest.raises(FluxliteError, match="cannot read certificate .*No such file"):
        curve.load_certificate(str(tmp_path / "nope"))


# ------------------------------------------------------------------ ZAP
class OneKey:
    """ZAP credentials: only the instance certificate's public key may connect."""

    def __init__(self, public: bytes):
        self.public = public
        self.seen: list[tuple[bytes, bool]] = []

    def callback(self, domain, key):
        ok = key == self.public
        self.seen.append((key, ok))
        return ok


def wait_monitor_event(mon: zmq.Socket, wanted: int, timeout_ms: int = 10000) -> dict:
    """The next monitor event of kind `wanted` (others are passed over)."""
    poller = zmq.Poller()
    poller.register(mon, zmq.POLLIN)
    while True:
        assert poller.poll(timeout_ms), f"no monitor event {wanted:#x} within {timeout_ms} ms"
        ev = recv_monitor_message(mon)
        if ev["event"] == wanted:
            return ev


def test_zap_accepts_the_certificate_holder_and_refuses_another_key(tmp_path):
    path = str(tmp_path / "curve.cert")
    assert keygen(path).returncode == 0
    cert = curve.load_certificate(path)
    ctx = zmq.Context()
    auth = zmq.auth.thread.ThreadAuthenticator(ctx)
    auth.start()
    keys = OneKey(cert.public)
    auth.configure_curve_callback("*", credentials_provider=keys)
    socks = []
    try:
        server = ctx.socket(zmq.ROUTER)
        socks.append(server)
        curve.apply(server, curve.server_socket_options(cert))
        port = server.bind_to_random_port("tcp://127.0.0.1")
        server_mon = server.get_monitor_socket(zmq.EVENT_HANDSHAKE_FAILED_AUTH
                                               | zmq.EVENT_HANDSHAKE_SUCCEEDED)
        socks.append(server_mon)

        # a client with another key pair (but the server's public key) is refused
        intruder = ctx.socket(zmq.DEALER)
        socks.append(intruder)
        curve.apply(intruder, curve.client_socket_options(curve.generate(), cert.public))
        intruder_mon = intruder.get_monitor_socket(zmq.EVENT_HANDSHAKE_FAILED_AUTH)
        socks.append(intruder_mon)
        intruder.connect(f"tcp://127.0.0.1:{port}")
        intruder.send(b"let me in")
        ev = wait_monitor_event(intruder_mon, zmq.EVENT_HANDSHAKE_FAILED_AUTH)
        assert ev["value"] == 400          # ZAP's "not authorized" status code
        wait_monitor_event(server_mon, zmq.EVENT_HANDSHAKE_FAILED_AUTH)

        # the holder of the certificate gets through, and its message is the only one
        member = ctx.socket(zmq.DEALER)
        socks.append(member)
        curve.apply(member, curve.client_socket_options(cert, cert.public))
        member.connect(f"tcp://127.0.0.1:{port}")
        member.send(b"hello")
        wait_monitor_event(server_mon, zmq.EVENT_HANDSHAKE_SUCCEEDED)
        assert server.poll(10000), "the certificate holder's message never arrived"
        _, body = server.recv_multipart()
        assert body == b"hello"
        assert not server.poll(0), "a message got through from the refused client"
        # (the refused client may have retried meanwhile: every try was refused)
        assert {ok for key, ok in keys.seen if key != cert.public} == {False}
        assert (cert.public, True) in keys.seen
    finally:
        for s in socks:
            s.close(linger=0)
        auth.stop()
        ctx.term()
