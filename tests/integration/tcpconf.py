"""A two-host TCP config on loopback (node0, node1) with a shared certificate, and
brokers started from it, for tests of the TCP overlay without network namespaces."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import uuid

from fluxlite.testing import TAG_VAR, _readline, assert_no_leaks, fluxlite_command

FL = fluxlite_command()
READY = ["sh", "-c", 'echo "$FLUXLITE_URI"; exec cat >/dev/null']


def local_tcp_config(tmp_path, extra: str = ""):
    """(config path, port, certificate path)."""
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
{extra}""")
    return str(conf), port, str(cert)


@contextlib.contextmanager
def tcp_brokers(tmp_path, conf: str, hosts=("node0",), args=()):
    """Brokers of `conf` for `hosts` (node0 first, with the ready program); yields
    (env with FLUXLITE_URI, {host: Popen}); on exit node0's program ends, and every
    process they started must be gone."""
    tag = uuid.uuid4().hex
    env = dict(os.environ, **{TAG_VAR: tag})
    env.pop("FLUXLITE_URI", None)
    procs = {}
    try:
        for host in hosts:
            cmd = FL + ["broker", "--config-path", conf, "--hostname", host,
                        "--rundir", str(tmp_path / f"rd-{host}"), *args]
            if host == "node0":
                cmd += READY
            procs[host] = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, env=env)
        uri = _readline(procs["node0"].stdout, 60).strip()
        assert uri.startswith("local://"), procs["node0"].stderr.read1().decode()
        env["FLUXLITE_URI"] = uri
        yield env, procs
    finally:
        p0 = procs.get("node0")
        if p0 is not None:
            p0.stdin.close()
        for p in procs.values():
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            for f in (p.stdout, p.stderr):
                f.close()
        assert_no_leaks(tag)
