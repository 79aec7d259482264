"""The PMI-1 simple wire protocol, server side: what the job shell answers a task
that MPICH's simple PMI client (src/pmi/simple/ in MPICH) runs in.

Each task holds one end of a socketpair (PMI_FD).  Every message is one line
of space separated `key=value` words, the first being `cmd=NAME`, ended by a
newline.  The conversation, as flux-core's server (src/common/libpmi/
simple_server.c under src/shell/pmi/) answers it:

    -> cmd=init pmi_version=1 pmi_subversion=1
    <- cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1
    -> cmd=get_maxes            <- cmd=maxes rc=0 kvsname_max=64 keylen_max=64 vallen_max=1024
    -> cmd=get_appnum           <- cmd=appnum rc=0 appnum=0
    -> cmd=get_my_kvsname       <- cmd=my_kvsname rc=0 kvsname=NAME
    -> cmd=get_universe_size    <- cmd=universe_size rc=0 size=N
    -> cmd=put kvsname=K key=k value=v          <- cmd=put_result rc=0
    -> cmd=barrier_in           (answered once every task of the job entered)
                                <- cmd=barrier_out rc=0
    -> cmd=get kvsname=K key=k  <- cmd=get_result rc=0 value=v   (rc=-1 when no task put k)
    -> cmd=finalize             <- cmd=finalize_ack rc=0
    -> cmd=abort exitcode=N     (no answer: the job is ended)

Anything else (publish_name, lookup_name, `mcmd=spawn`, an unknown command, a
line that is not `key=value` words, a command before init) gets an answer
with rc=-1 and a `msg=` saying why; a line longer than LINE_MAX closes the
connection.  The server keeps no sockets: `PMI1Server.feed()` takes the bytes
a task sent and returns what to do (answers, a barrier to enter, an abort, a
connection to close), so it can be driven by any event loop and by tests.

The barrier is the exchange: keys put since the last barrier stay here until
every local task entered it; then one `Barrier` with those keys goes to the
caller, which merges the keys of all shells and hands the result to
`barrier_done()` (or an error to `barrier_failed()`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ProtocolError
from .pmi2 import KEY_MAX, VALUE_MAX

VERSION = 1
SUBVERSION = 1
KVSNAME_MAX = 64
LINE_MAX = 4096     # a put of the longest key and value fits with room to spare
UNSUPPORTED = ("publish_name", "unpublish_name", "lookup_name", "spawn")
# keys the shell sets for every task: no task may put them
RESERVED_KEYS = frozenset({"PMI_process_mapping"})
# bytes of keys and values one task may put over the job (what every shell of the
# job holds for it); MPICH's business cards are a few hundred bytes
PUT_BYTES_MAX = 1 << 20


def encode(cmd: str, pairs: list[tuple[str, object]] = ()) -> bytes:
    """One PMI-1 line: `cmd=CMD key=value ...\\n`.  Values must not hold spaces or
    newlines (the wire protocol cannot carry them); message text has them replaced."""
    words = [f"cmd={cmd}"]
    for k, v in pairs:
        words.append(f"{k}={v}")
    return (" ".join(words) + "\n").encode()


def decode(line: bytes) -> tuple[str, dict[str, str]]:
    """Split one line (without its newline) into its command and its words.  The
    first word is `cmd=NAME` (or `mcmd=NAME`, how MPICH starts a spawn)."""
    try:
        text = line.decode()
    except UnicodeDecodeError:
        raise ProtocolError(f"PMI-1 line is not UTF-8: {line[:80]!r}") from None
    text = text.rstrip("\r")
    words = text.split(" ")
    pairs: list[tuple[str, str]] = []
    for w in words:
        if not w:
            continue
        key, sep, value = w.partition("=")
        if not sep or not key:
            raise ProtocolError(f"PMI-1 line has a word that is not key=value: {w[:80]!r}")
        pairs.append((key, value))
    if not pairs or pairs[0][0] not in ("cmd", "mcmd") or not pairs[0][1]:
        raise ProtocolError(f"PMI-1 line does not start with cmd=NAME: {text[:80]!r}")
    return pairs[0][1], dict(pairs[1:])


def _msg(text: str) -> str:
    """Message text as one word (the protocol splits on spaces)."""
    return "_".join(text.replace("=", ":").split())[:VALUE_MAX]


# ------------------------------------------------------------------ effects
@dataclass
class Answer:
    """Send `data` to the task."""
    rank: int
    data: bytes


@dataclass
class Close:
    """Close the task's connection; `why` is worth one log line (empty: nothing to say).
    `eof`: the task closed it, which says more once its exit status is known."""
    rank: int
    why: str = ""
    eof: bool = False


@dataclass
class Barrier:
    """Every local task entered the barrier: exchange `keys` with the other shells.
    With `error`, this shell's barrier cannot complete: the others must be told."""
    keys: dict[str, str]
    error: str = ""
    gone_rank: int | None = None      # with `error`: the task whose leaving caused it


@dataclass
class Log:
    """Something worth one log line (a task speaking garbage; said once per task)."""
    rank: int
    why: str


@dataclass
class Abort:
    """A task asked for the job to be ended."""
    rank: int
    code: int
    message: str


@dataclass
class _Client:
    rank: int
    buf: bytes = b""
    initialized: bool = False
    finalized: bool = False
    in_barrier: bool = False
    gone: bool = False
    complained: bool = False
    put_bytes: int = 0                # bytes of the keys and values it put
    keys: set = field(default_factory=set)   # the keys it put


@dataclass
class PMI1Server:
    """The PMI-1 state of one shell: its local tasks, their keys, the barrier."""
    kvsname: str
    size: int
    ranks: list[int]
    appnum: int = 0
    universe_size: int | None = None
    kvs: dict[str, str] = field(default_factory=dict)   # keys seen after barriers (and preput)
    pending: dict[str, str] = field(default_factory=dict)  # local puts since the last barrier
    barrier_busy: bool = False        # a Barrier was handed out and is not answered yet
    broken: str = ""                  # why no barrier can complete here any more

    def __post_init__(self):
        self.clients = {r: _Client(r) for r in self.ranks}

    # ---------------------------------------------------------------- input
    def feed(self, rank: int, data: bytes) -> list:
        """Bytes from task `rank` (b"" at end of file): the effects, in order."""
        c = self.clients[rank]
        if c.gone:
            return []
        if not data:
            # a task that never spoke PMI (not an MPI program) leaves quietly
            return self.task_gone(rank, "closed its PMI connection before finalize"
                                  if c.initialized and not c.finalized else "", eof=True)
        c.buf += data
        out: list = []
        while not c.gone:
            nl = c.buf.find(b"\n")
            if nl < 0:
                if len(c.buf) > LINE_MAX:
                    out += self._drop(c, f"sent a PMI line longer than {LINE_MAX} bytes")
                break
            line, c.buf = c.buf[:nl], c.buf[nl + 1:]
            if nl > LINE_MAX:
                out += self._drop(c, f"sent a PMI line longer than {LINE_MAX} bytes")
                break
            out += self._line(c, line)
        return out

    def task_gone(self, rank: int, why: str = "", eof: bool = False) -> list:
        """The task's connection ended.  A task that leaves before finalize cannot enter
        the next barrier; the others are told so rather than left waiting."""
        c = self.clients[rank]
        if c.gone:
            return []
        c.gone = True
        out: list = [Close(rank, why, eof)]
        # a task that spoke PMI and left unfinalized can enter no barrier again: the
        # job's barrier fails now, here and (through the leader) on every other shell,
        # whether or not a task here is waiting in it
        if not c.finalized and not self.barrier_busy and (
                c.initialized or any(o.in_barrier for o in self.clients.values())):
            out += self._fail(f"task rank {rank} left before the barrier", rank)
        return out

    def _fail(self, why: str, rank: int | None = None) -> list:
        """A barrier cannot complete: release the local tasks and, once, report it."""
        out: list = []
        if not self.broken:
            self.broken = why
            out.append(Barrier({}, error=why, gone_rank=rank))
        return out + self.barrier_failed(why)

    def _drop(self, c: _Client, why: str) -> list:
        c.buf = b""
        return self.task_gone(c.rank, why)

    # ------------------------------------------------------------- barrier
    def barrier_done(self, keys: dict[str, str]) -> list:
        """The exchange finished: the keys of every shell; answer the waiting tasks."""
        self.kvs.update((k, v) for k, v in keys.items() if k not in RESERVED_KEYS)
        return self._release(0, "")

    def barrier_failed(self, why: str) -> list:
        """The exchange failed (a task or shell is gone): tell the waiting tasks."""
        return self._release(-1, why)

    def _release(self, rc: int, why: str) -> list:
        self.barrier_busy = False
        out = []
        for c in self.clients.values():
            if c.in_barrier:
                c.in_barrier = False
                pairs = [("rc", rc)] + ([("msg", _msg(why))] if why else [])
                if not c.gone:
                    out.append(Answer(c.rank, encode("barrier_out", pairs)))
        return out

    def _barrier_in(self, c: _Client) -> list:
        if c.in_barrier:
            return [self._error(c, "barrier_out", "barrier_in twice in one barrier")]
        c.in_barrier = True
        live = [o for o in self.clients.values() if not o.finalized]
        if any(o.gone for o in live):
            gone = min(o.rank for o in live if o.gone)
            return self._fail(f"task rank {gone} left before the barrier", gone)
        if all(o.in_barrier for o in live) and not self.barrier_busy:
            self.barrier_busy = True
            keys, self.pending = self.pending, {}
            return [Barrier(keys)]
        return []

    # --------------------------------------------------------------- lines
    def _error(self, c: _Client, answer: str, why: str) -> Answer:
        return Answer(c.rank, encode(answer, [("rc", -1), ("msg", _msg(why))]))

    def _complain(self, c: _Client, answer: str, why: str) -> list:
        out: list = [self._error(c, answer, why)]
        if not c.complained:
            c.complained = True
            out.append(Log(c.rank, why))
        return out

    def _line(self, c: _Client, line: bytes) -> list:
        try:
            cmd, args = decode(line)
        except ProtocolError as exc:
            return self._complain(c, "error", str(exc))
        if cmd == "init":
            return [self._init(c, args)]
        if cmd in UNSUPPORTED:
            name = "spawn_result" if cmd == "spawn" else f"{cmd}_result"
            return [self._error(c, name, f"{cmd} is not supported")]
        if cmd == "abort":
            return self._abort(c, args)
        handler = getattr(self, f"_cmd_{cmd}", None)
        if handler is None:
            return self._complain(c, "error", f"unknown PMI-1 command {cmd!r}")
        if not c.initialized:
            return [self._error(c, "error", f"{cmd} before init")]
        rv = handler(c, args)
        return rv if isinstance(rv, list) else [rv]

    def _init(self, c: _Client, args: dict) -> Answer:
        version = (args.get("pmi_version"), args.get("pmi_subversion"))
        if version[0] != str(VERSION):
            return Answer(c.rank, encode("response_to_init", [
                ("rc", -1), ("pmi_version", VERSION), ("pmi_subversion", SUBVERSION),
                ("msg", _msg(f"PMI version {version[0]} is not served (only 1.1)"))]))
        c.initialized = True
        return Answer(c.rank, encode("response_to_init", [
            ("rc", 0), ("pmi_version", VERSION), ("pmi_subversion", SUBVERSION)]))

    def _abort(self, c: _Client, args: dict) -> list:
        raw = args.get("exitcode", args.get("exit_code", "1"))
        try:
            code = int(raw)
        except ValueError:
            code = 1
        message = args.get("error_msg") or args.get("msg") or ""
        return [Abort(c.rank, code, message)]

    def _cmd_get_maxes(self, c, args) -> Answer:
        return Answer(c.rank, encode("maxes", [("rc", 0), ("kvsname_max", KVSNAME_MAX),
                                               ("keylen_max", KEY_MAX),
                                               ("vallen_max", VALUE_MAX)]))

    def _cmd_get_appnum(self, c, args) -> Answer:
        return Answer(c.rank, encode("appnum", [("rc", 0), ("appnum", self.appnum)]))

    def _cmd_get_my_kvsname(self, c, args) -> Answer:
        return Answer(c.rank, encode("my_kvsname", [("rc", 0), ("kvsname", self.kvsname)]))

    def _cmd_get_universe_size(self, c, args) -> Answer:
        size = self.universe_size if self.universe_size is not None else self.size
        return Answer(c.rank, encode("universe_size", [("rc", 0), ("size", size)]))

    def _check_kvs(self, c, args, answer: str) -> Answer | None:
        name = args.get("kvsname")
        if name is not None and name != self.kvsname:
            return self._error(c, answer, f"unknown kvsname {name}")
        key = args.get("key", "")
        if not key or len(key.encode()) > KEY_MAX:
            return self._error(c, answer, f"key must be 1-{KEY_MAX} bytes")
        return None

    def _cmd_put(self, c, args) -> Answer:
        bad = self._check_kvs(c, args, "put_result")
        if bad is not None:
            return bad
        value = args.get("value")
        if value is None:
            return self._error(c, "put_result", "put without value=")
        if len(value.encode()) > VALUE_MAX:
            return self._error(c, "put_result", f"value longer than {VALUE_MAX} bytes")
        key = args["key"]
        if key in RESERVED_KEYS:
            return self._error(c, "put_result", f"key {key} is reserved: it is read-only")
        size = len(key) + len(value)
        if key in c.keys:   # a key it put before: its old value no longer counts
            old = self.pending.get(key, self.kvs.get(key))
            size -= len(key) + len(old) if old is not None else 0
        if c.put_bytes + size > PUT_BYTES_MAX:
            return self._error(c, "put_result", f"this task's puts would pass "
                                                f"{PUT_BYTES_MAX} bytes of keys and values")
        c.put_bytes += size
        c.keys.add(key)
        self.pending[key] = value
        return Answer(c.rank, encode("put_result", [("rc", 0)]))

    def _cmd_get(self, c, args) -> Answer:
        bad = self._check_kvs(c, args, "get_result")
        if bad is not None:
            return bad
        key = args["key"]
        value = self.kvs.get(key)
        if value is None:
            return self._error(c, "get_result", f"key {key} not found")
        return Answer(c.rank, encode("get_result", [("rc", 0), ("value", value)]))

    def _cmd_barrier_in(self, c, args) -> list:
        return self._barrier_in(c)

    def _cmd_finalize(self, c, args) -> Answer:
        c.finalized = True
        return Answer(c.rank, encode("finalize_ack", [("rc", 0)]))
