"""The PMI-2 wire protocol, client side: how a broker started by `srun --mpi=pmi2`
exchanges its endpoint with the others.

Slurm's pmi2 plugin (src/plugins/mpi/pmi2/ in Slurm) gives each task
PMI_FD (its end of a socket to slurmstepd), PMI_RANK, PMI_SIZE and PMI_JOBID
("JOBID.STEPID").  The conversation, as Slurm and MPICH's simple PMI-2 client
(src/pmi/pmi2/ in MPICH) hold it:

1. One PMI-1 style line each way:
       -> cmd=init pmi_version=2 pmi_subversion=0\\n
       <- cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\\n
   (Slurm reads this line with one read(2), so it is sent in one write.)
2. Then every message is a 6-byte decimal length, space padded ("38    "),
   followed by that many bytes of `key=value;` pairs, the first being
   `cmd=NAME;`.  A `;` inside a value is written `;;` (MPICH); Slurm does
   not undo that escape, so values holding `;` are refused here.
       -> cmd=fullinit;pmijobid=J;pmirank=R;threaded=FALSE;
       <- cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=R;size=N;appnum=-1;...
       -> cmd=job-getid;                 <- cmd=job-getid-response;rc=0;jobid=J;
       -> cmd=kvs-put;key=K;value=V;     <- cmd=kvs-put-response;rc=0;
       -> cmd=kvs-fence;                 <- cmd=kvs-fence-response;rc=0;   (once all tasks fenced)
       -> cmd=kvs-get;jobid=J;key=K;     <- cmd=kvs-get-response;rc=0;found=TRUE;value=V;
       -> cmd=info-getjobattr;key=K;     <- cmd=info-getjobattr-response;rc=0;found=TRUE;value=V;
       -> cmd=finalize;                  <- cmd=finalize-response;rc=0;   (the server then closes)
       -> cmd=abort;isworld=TRUE;msg=M;  (no answer: Slurm kills the step)

`PMI2Client` satisfies fluxlite.pmi.client.PMIClient, the interface the
PMI-1 client has too (rank, size, kvsname; init, put, barrier, get, finalize,
abort, close), so the broker's bootstrap does not care which one it holds;
the handshake runs at construction, so init() has nothing left to do.  Keys
are at most 64 bytes, values 1024
(PMI2_MAX_KEYLEN / PMI2_MAX_VALLEN).  A malformed or unexpected answer is a
ProtocolError, a server that goes away HostUnreachable, a bound exceeded
RPCTimeout; get() of a key nobody put returns None.  Slurm's pmi2 plugin also
accepts a PMI-1 client on the same PMI_FD.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

from ..errors import HostUnreachable, ProtocolError, RPCTimeout, UsageError

KEY_MAX = 64
VALUE_MAX = 1024
LENGTH_FIELD = 6
MESSAGE_MAX = 64 * 1024   # MPICH's PMII_MAX_COMMAND_LEN: nothing longer is honest


def encode(cmd: str, pairs: list[tuple[str, str]] = ()) -> bytes:
    """One framed PMI-2 message: the length field, then `cmd=CMD;key=value;...`."""
    body = f"cmd={cmd};" + "".join(f"{k}={v.replace(';', ';;')};" for k, v in pairs)
    data = body.encode()
    if len(data) >= 10 ** LENGTH_FIELD:
        raise UsageError(f"PMI-2 message of {len(data)} bytes is too long")
    return f"{len(data):<{LENGTH_FIELD}d}".encode() + data


def decode(body: bytes) -> tuple[str, dict[str, str]]:
    """Split a message body (without its length field) into its command and pairs."""
    try:
        text = body.decode()
    except UnicodeDecodeError:
        raise ProtocolError(f"PMI-2 message is not UTF-8: {body[:80]!r}") from None
    pairs: list[tuple[str, str]] = []
    i = 0
    while i < len(text):
        eq = text.find("=", i)
        if eq < 0:
            raise ProtocolError(f"PMI-2 message has a key without a value: {text!r}")
        key = text[i:eq]
        value: list[str] = []
        j = eq + 1
        while True:
            semi = text.find(";", j)
            if semi < 0:
                raise ProtocolError(f"PMI-2 message is not ';'-terminated: {text!r}")
            value.append(text[j:semi])
            if text[semi + 1:semi + 2] == ";":     # an escaped ';' inside the value
                value.append(";")
                j = semi + 2
                continue
            i = semi + 1
            break
        pairs.append((key, "".join(value)))
    if not pairs or pairs[0][0] != "cmd":
        raise ProtocolError(f"PMI-2 message does not start with cmd=: {text!r}")
    return pairs[0][1], dict(pairs[1:])


class PMI2Client:
    """A PMI-2 client on a connected socket (PMI_FD); the handshake runs at construction."""

    def __init__(self, sock: socket.socket, *, jobid: str | None = None, rank: int | None = None,
                 timeout: float | None = None):
        self._sock = sock
        self._buf = b""
        self._closed = False
        self._finalized = False
        sock.settimeout(timeout)
        try:
            self._handshake(jobid, rank)
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None, *,
                     timeout: float | None = None) -> PMI2Client | None:
        """The client for a PMI-2 launch (PMI_FD, PMI_RANK, PMI_SIZE and PMI_JOBID, as
        `srun --mpi=pmi2` sets them), or None when the environment is not one."""
        env = os.environ if environ is None else environ
        fd, rank, size, jobid = (env.get(k) for k in ("PMI_FD", "PMI_RANK", "PMI_SIZE",
                                                      "PMI_JOBID"))
        if fd is None or rank is None or size is None or jobid is None:
            return None
        if not fd.isdigit() or not rank.isdigit() or not size.isdigit():
            raise UsageError(f"PMI-2 environment is malformed: PMI_FD={fd!r} PMI_RANK={rank!r} "
                             f"PMI_SIZE={size!r} (expected integers)")
        try:
            sock = socket.socket(fileno=int(fd))
        except OSError as exc:
            raise UsageError.from_oserror(exc, f"PMI_FD={fd} is not an open socket") from None
        client = cls(sock, jobid=jobid, rank=int(rank), timeout=timeout)
        if client.size != int(size):
            client.close()
            raise ProtocolError(f"PMI-2 server says size {client.size}, PMI_SIZE is {size}")
        return client

    # ------------------------------------------------------------ the interface
    def init(self) -> None:
        """Nothing: the init line and fullinit were exchanged at construction."""
        if self._closed:
            raise UsageError("PMI-2 init: the client is closed")

    def put(self, key: str, value: str) -> None:
        """Publish key=value; visible to every rank after the next barrier()."""
        _check_key(key)
        _check_value(key, value)
        self._call("kvs-put", [("key", key), ("value", value)])

    def barrier(self) -> None:
        """Wait until every rank has entered; afterwards every put is visible (kvs-fence)."""
        self._call("kvs-fence")

    def get(self, key: str) -> str | None:
        """The value another rank put (before the last barrier); None if there is none."""
        _check_key(key)
        reply = self._call("kvs-get", [("jobid", self.kvsname), ("key", key)])
        if reply.get("found", "").upper() != "TRUE":
            return None
        return reply.get("value", "")

    def job_attr(self, key: str) -> str | None:
        """A job attribute of the launcher (PMI_process_mapping, universeSize), or None."""
        _check_key(key)
        reply = self._call("info-getjobattr", [("key", key)])
        if reply.get("found", "").upper() != "TRUE":
            return None
        return reply.get("value", "")

    def finalize(self) -> None:
        """Tell the server this rank is done; the connection is closed afterwards."""
        if self._finalized or self._closed:
            return
        self._call("finalize")
        self._finalized = True
        self.close()

    def abort(self, code: int, message: str) -> None:
        """Ask the launcher to end the whole job.  PMI-2 carries no exit code (Slurm kills
        the step), so the caller should exit with `code` itself afterwards."""
        msg = message.replace(";", ",").replace("\n", " ")[:VALUE_MAX]
        try:
            self._send(encode("abort", [("isworld", "TRUE"), ("exitcode", str(int(code))),
                                        ("msg", msg)]))
        finally:
            self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._sock.close()

    def __enter__(self) -> PMI2Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ internals
    def _handshake(self, jobid: str | None, rank: int | None) -> None:
        self._send(b"cmd=init pmi_version=2 pmi_subversion=0\n")
        line = self._read_line()
        words = dict(w.partition("=")[::2] for w in line.split())
        if words.get("cmd") != "response_to_init":
            raise ProtocolError(f"PMI-2 server answered init with {line!r}")
        if words.get("rc") != "0":
            raise ProtocolError(f"PMI-2 server refused version 2.0 (it offers "
                                f"{words.get('pmi_version')}.{words.get('pmi_subversion')})")
        pairs = []
        if jobid is not None:
            pairs.append(("pmijobid", jobid))
        if rank is not None:
            pairs.append(("pmirank", str(rank)))
        pairs.append(("threaded", "FALSE"))
        reply = self._call("fullinit", pairs)
        try:
            self.rank = int(reply["rank"])
            self.size = int(reply["size"])
        except (KeyError, ValueError):
            raise ProtocolError(f"PMI-2 fullinit-response lacks rank or size: {reply}") from None
        if not 0 <= self.rank < self.size:
            raise ProtocolError(f"PMI-2 server gave rank {self.rank} of size {self.size}")
        if rank is not None and rank != self.rank:
            raise ProtocolError(f"PMI-2 server says rank {self.rank}, PMI_RANK is {rank}")
        appnum = reply.get("appnum", "0")
        self.appnum = int(appnum) if appnum.lstrip("-").isdigit() else 0
        self.spawned = "spawner-jobid" in reply
        self.kvsname = self._call("job-getid").get("jobid") or (jobid or "")

    def _call(self, cmd: str, pairs: list[tuple[str, str]] = ()) -> dict[str, str]:
        if self._closed:
            raise UsageError(f"PMI-2 {cmd}: the client is closed")
        self._send(encode(cmd, pairs))
        got, reply = decode(self._read_message())
        if got != f"{cmd}-response":
            raise ProtocolError(f"PMI-2 {cmd}: the server answered {got!r}")
        rc = reply.get("rc", "0")
        if rc != "0":
            raise ProtocolError(f"PMI-2 {cmd} failed (rc={rc}): "
                                f"{reply.get('errmsg') or reply.get('msg') or 'no reason given'}")
        return reply

    def _send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except TimeoutError:
            raise RPCTimeout("PMI-2 server did not take a message in time") from None
        except OSError as exc:
            raise HostUnreachable.from_oserror(exc, "PMI-2 server is gone") from None

    def _recv_more(self) -> None:
        try:
            chunk = self._sock.recv(65536)
        except TimeoutError:
            raise RPCTimeout("PMI-2 server did not answer in time") from None
        except OSError as exc:
            raise HostUnreachable.from_oserror(exc, "PMI-2 server is gone") from None
        if not chunk:
            raise HostUnreachable("PMI-2 server closed the connection")
        self._buf += chunk

    def _read_line(self) -> str:
        while b"\n" not in self._buf:
            if len(self._buf) > MESSAGE_MAX:
                raise ProtocolError("PMI-2 server sent an init line without a newline")
            self._recv_more()
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode(errors="replace")

    def _read_message(self) -> bytes:
        while len(self._buf) < LENGTH_FIELD:
            self._recv_more()
        field = self._buf[:LENGTH_FIELD].decode(errors="replace").strip()
        if not field.isdigit():
            raise ProtocolError(f"PMI-2 length field is not a number: {self._buf[:6]!r}")
        length = int(field)
        if length > MESSAGE_MAX:
            raise ProtocolError(f"PMI-2 message of {length} bytes is longer than {MESSAGE_MAX}")
        while len(self._buf) < LENGTH_FIELD + length:
            self._recv_more()
        body = self._buf[LENGTH_FIELD:LENGTH_FIELD + length]
        self._buf = self._buf[LENGTH_FIELD + length:]
        return body


def _check_key(key: str) -> None:
    if not isinstance(key, str) or not key or len(key.encode()) > KEY_MAX \
            or any(c in key for c in "=;\n"):
        raise UsageError(f"PMI-2 key {key!r}: 1-{KEY_MAX} bytes, without '=', ';' or newlines")


def _check_value(key: str, value: str) -> None:
    if not isinstance(value, str):
        raise UsageError(f"PMI-2 value of {key!r} must be a string")
    if len(value.encode()) > VALUE_MAX:
        raise UsageError(f"PMI-2 value of {key!r} is {len(value.encode())} bytes; "
                         f"at most {VALUE_MAX}")
    if ";" in value or "\n" in value:
        raise UsageError(f"PMI-2 value of {key!r} may not hold ';' or a newline "
                         "(Slurm's server cannot carry them)")
