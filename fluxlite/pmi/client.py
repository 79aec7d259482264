"""The PMI-1 simple wire protocol, client side: how a broker started by a PMI
launcher (a fluxlite job shell, MPICH's Hydra `mpiexec`) learns its rank and
the instance's size and finds the other brokers.  The lines are pmi1.py's
codec; the conversation is the one pmi1.py's server answers.

Where the connection comes from, as MPICH's simple client (src/pmi/simple/)
looks for it:

    PMI_FD=N               an inherited socket (fluxlite's shell, Hydra)
    PMI_PORT=host:port     otherwise: a TCP connection; with PMI_ID set the
                           client first says `cmd=initack pmiid=ID` and the
                           server answers `cmd=initack` then `cmd=set size=N`,
                           `cmd=set rank=N`, `cmd=set debug=N`
    PMI_RANK, PMI_SIZE     the task's rank and the job's size (PMI_SPAWNED is
                           not looked at: a broker is never spawned)

Each call sends one line and reads one answer (a barrier's answer comes once
every task entered it); an answer with a nonzero rc raises PMIError naming
the command and the server's message.  `get` of a key no task put returns
None.  The client is blocking: a broker uses it before its event loop runs.

`PMIClient` is what a broker's bootstrap holds: this PMI-1 client or the PMI-2
one (pmi2.py, for `srun --mpi=pmi2`).  `from_env()` picks: PMI-2 when the
environment is Slurm's pmi2 plugin's (PMI_FD, PMI_RANK, PMI_SIZE and
PMI_JOBID; no PMI-1 launcher sets PMI_JOBID), else PMI-1.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from typing import Protocol

from ..errors import FluxliteError, ProtocolError
from .pmi1 import LINE_MAX, SUBVERSION, VERSION, decode, encode


class PMIError(FluxliteError):
    """The PMI server refused a command, or the connection failed."""


class PMIClient(Protocol):
    """What the broker's bootstrap calls, whichever PMI version the launcher speaks.
    init() first; put() values are one word; get() is None for a key nobody put;
    finalize() then close()."""

    rank: int
    size: int

    def init(self) -> None: ...
    def put(self, key: str, value: str) -> None: ...
    def barrier(self) -> None: ...
    def get(self, key: str) -> str | None: ...
    def finalize(self) -> None: ...
    def abort(self, code: int, message: str) -> None: ...
    def close(self) -> None: ...


def is_pmi2(env: Mapping[str, str] = os.environ) -> bool:
    """Whether this is Slurm's PMI-2 environment (`srun --mpi=pmi2`)."""
    return all(env.get(k) is not None for k in ("PMI_FD", "PMI_RANK", "PMI_SIZE", "PMI_JOBID"))


def from_env(env: Mapping[str, str] = os.environ) -> PMIClient:
    """The client this process's launcher speaks to (see in_environment())."""
    if is_pmi2(env):
        from .pmi2 import PMI2Client
        client = PMI2Client.from_environ(env)
        assert client is not None
        return client
    return PMI1Client.from_env(env)


def in_environment(env: Mapping[str, str] = os.environ) -> bool:
    """Whether a PMI launcher started this process (a connection, a rank and a size)."""
    if env.get("PMI_PORT") and env.get("PMI_ID") is not None:
        return True     # rank and size come in the initack handshake
    return bool((env.get("PMI_FD") or env.get("PMI_PORT"))
                and env.get("PMI_RANK") is not None and env.get("PMI_SIZE") is not None)


def _env_int(env: Mapping[str, str], name: str) -> int:
    raw = env.get(name)
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise PMIError(f"PMI: {name}={raw!r} is not a number") from None


class PMI1Client:
    """One task's PMI-1 connection."""

    def __init__(self, sock: socket.socket, rank: int, size: int):
        self.sock = sock
        self.rank = rank
        self.size = size
        self.kvsname = ""
        self.buf = b""

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> PMI1Client:
        """Connect as the environment says (PMI_FD, else PMI_PORT)."""
        pmiid = _env_int(env, "PMI_ID") if env.get("PMI_ID") is not None else None
        if env.get("PMI_FD") or pmiid is None:
            rank, size = _env_int(env, "PMI_RANK"), _env_int(env, "PMI_SIZE")
        else:
            rank, size = pmiid, 1       # the initack handshake says
        if env.get("PMI_FD"):
            fd = _env_int(env, "PMI_FD")
            try:
                sock = socket.socket(fileno=fd)
            except OSError as exc:
                raise PMIError(f"PMI: PMI_FD={fd} is not a socket: {exc.strerror}") from None
            sock.setblocking(True)
            return cls(sock, rank, size)
        port = env.get("PMI_PORT")
        if not port:
            raise PMIError("PMI: neither PMI_FD nor PMI_PORT is set")
        host, sep, num = port.rpartition(":")
        if not sep or not host or not num.isdigit():
            raise PMIError(f"PMI: PMI_PORT={port!r} is not host:port")
        try:
            sock = socket.create_connection((host, int(num)))
        except OSError as exc:
            raise PMIError(f"PMI: cannot connect to PMI_PORT={port}: {exc.strerror or exc}") \
                from None
        client = cls(sock, rank, size)
        if pmiid is not None:
            client._initack(pmiid)
        return client

    # ------------------------------------------------------------ wire
    def _send(self, cmd: str, pairs: list = ()) -> None:
        try:
            self.sock.sendall(encode(cmd, pairs))
        except OSError as exc:
            raise PMIError(f"PMI {cmd}: the connection failed: {exc.strerror or exc}") \
                from None

    def _read(self, cmd: str) -> tuple[str, dict[str, str]]:
        while b"\n" not in self.buf:
            if len(self.buf) > LINE_MAX:
                raise PMIError(f"PMI {cmd}: an answer longer than {LINE_MAX} bytes")
            try:
                data = self.sock.recv(65536)
            except OSError as exc:
                raise PMIError(f"PMI {cmd}: the connection failed: {exc.strerror or exc}") \
                    from None
            if not data:
                raise PMIError(f"PMI {cmd}: the server closed the connection")
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        try:
            return decode(line)
        except ProtocolError as exc:
            raise PMIError(f"PMI {cmd}: {exc}") from None

    def _call(self, cmd: str, answer: str, pairs: list = ()) -> dict[str, str]:
        self._send(cmd, pairs)
        got, args = self._read(cmd)
        why = args.get("msg", "").replace("_", " ")
        if args.get("rc", "0") != "0" or got == "error":
            raise PMIError(f"PMI {cmd} failed (rc={args.get('rc', '?')})"
                           + (f": {why}" if why else ""))
        if got != answer:
            raise PMIError(f"PMI {cmd}: expected cmd={answer}, got cmd={got}")
        return args

    def _initack(self, pmiid: int) -> None:
        self._call("initack", "initack", [("pmiid", pmiid)])
        for _ in range(3):
            got, args = self._read("initack")
            if got != "set":
                raise PMIError(f"PMI initack: expected cmd=set, got cmd={got}")
            if "size" in args:
                self.size = int(args["size"])
            elif "rank" in args:
                self.rank = int(args["rank"])

    # ------------------------------------------------------------ calls
    def init(self) -> None:
        args = self._call("init", "response_to_init",
                          [("pmi_version", VERSION), ("pmi_subversion", SUBVERSION)])
        if args.get("pmi_version") != str(VERSION):
            raise PMIError(f"PMI init: the server speaks version {args.get('pmi_version')}")

    def get_maxes(self) -> dict[str, int]:
        args = self._call("get_maxes", "maxes")
        return {k: int(args[k]) for k in ("kvsname_max", "keylen_max", "vallen_max")
                if k in args}

    def get_my_kvsname(self) -> str:
        self.kvsname = self._call("get_my_kvsname", "my_kvsname").get("kvsname", "")
        return self.kvsname

    def put(self, key: str, value: str) -> None:
        if not value or any(c in value for c in " \n"):
            raise PMIError(f"PMI put {key}: the value must be one word (got {value!r})")
        if not self.kvsname:
            self.get_my_kvsname()
        self._call("put", "put_result", [("kvsname", self.kvsname), ("key", key),
                                         ("value", value)])

    def barrier(self) -> None:
        self._call("barrier_in", "barrier_out")

    def get(self, key: str) -> str | None:
        """The value some task put under `key` before the last barrier; None if none did."""
        if not self.kvsname:
            self.get_my_kvsname()
        self._send("get", [("kvsname", self.kvsname), ("key", key)])
        got, args = self._read("get")
        if got != "get_result":
            raise PMIError(f"PMI get: expected cmd=get_result, got cmd={got}")
        if args.get("rc", "0") != "0":
            return None
        return args.get("value")

    def finalize(self) -> None:
        self._call("finalize", "finalize_ack")

    def abort(self, code: int, message: str) -> None:
        """Ask the launcher to end the job (no answer comes)."""
        msg = "_".join(message.replace("=", ":").split())[:200]
        try:
            self.sock.sendall(encode("abort", [("exitcode", code), ("error_msg", msg)]))
        except OSError:
            pass

    def close(self) -> None:
        self.sock.close()
