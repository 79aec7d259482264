"""Base class for in-broker services, and the small context a broker gives each one.

    class KVS(Service):
        name = "kvs"
        @handler("kvs.lookup", schema=LookupRequest, roles=ANY)
        def lookup(self, msg, req): ...       # return a payload, or raise FluxliteError

A service sees its broker only through a ServiceContext: who and where it is
(rank, size, owner, hostname), the attributes, and how to send (an RPC, a
request that wants no answer, a response, an event).  Anything more a service
needs (the KVS for job-manager, the spawner for rexec, the membership for
resource) the broker hands it by name at construction; broker.py is the one place
that wires parts together.  Requests reach handlers through the one dispatcher
(protocol/dispatch.py), which checks roles and payload shapes first.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import PermissionDenied
from ..protocol.dispatch import ANY, NO_REPLY, OWNER, Dispatcher, handler
from ..protocol.message import NORESPONSE, Message
from ..util.log import get_logger
from . import modstats
from .traffic import Traffic

__all__ = ["Service", "ServiceContext", "handler", "ANY", "OWNER", "NO_REPLY"]


@dataclass
class ServiceContext:
    """What a service may use of its broker."""

    rank: int
    size: int
    owner: int                         # the instance owner's uid
    hostname: str
    hosts: tuple[str, ...]             # every rank's host name, in rank order
    attrs: dict[str, str]              # read; attr.set is the one writer
    rpc: Callable                      # rpc(topic, payload=None, *, nodeid=None, streaming=False)
    send: Callable                     # send(topic, payload=None, *, nodeid=None): no answer
    respond: Callable[[Message], None]  # a response message on its way back
    publish: Callable                  # publish(topic, payload=None): an event to all ranks
    state: Callable[[], str]           # the broker's lifecycle state now
    at_least: Callable[[str], bool]    # whether the lifecycle reached a state ("cleanup")


class Service:
    name = ""
    aliases: tuple[str, ...] = ()   # Flux's service names it also answers (attr, job-list)
    # `module remove NAME`: why this one cannot stop while the broker runs (None: it
    # can, and `module load NAME` builds it again; see broker/modules.py)
    busy: str | None = "the broker cannot run without it"

    def __init__(self, ctx: ServiceContext):
        self.ctx = ctx
        self.log = get_logger(self.name)
        self.traffic = Traffic(self.name)   # counters, debug flags, tracers (module.*)
        self.unloaded = False               # `module remove`d: requests fail ENOSYS
        self.dispatcher = Dispatcher(self._send_response, self.log, fallback=self._builtin)
        self.dispatcher.add_object(self)
        # streams opened by clients, so a vanished client's watchers can be dropped
        self._streams: dict[tuple, dict[int, list]] = {}   # route -> matchtag -> cancels
        self.last_active = time.monotonic()  # when a request last came (`module list` idle)

    # lifecycle hooks ------------------------------------------------------
    async def start(self) -> None:
        """Called once the broker's sockets are up, before the broker enters quorum."""

    async def cleanup(self) -> None:
        """Called when the instance is shutting down, before brokers leave."""

    async def unload(self) -> None:
        """`module remove`: answer or hand back what this service holds for others
        before it stops (only a service with busy None is ever unloaded)."""

    def stop(self) -> None:
        self.dispatcher.stop()

    # dispatch -------------------------------------------------------------
    def dispatch(self, msg: Message) -> bool:
        """True if the request may be answered later (see Dispatcher.dispatch)."""
        if self.unloaded:   # routed before `module remove`, handed over after it
            if not msg.flags & NORESPONSE:
                self.ctx.respond(msg.response(None, errno.ENOSYS,
                                              f"{self.name} module was removed"))
            return False
        self.last_active = time.monotonic()
        self.traffic.note("rx", msg)
        return self.dispatcher.dispatch(msg)

    def _send_response(self, msg: Message) -> None:
        self.traffic.note("tx", msg)
        self.ctx.respond(msg)

    def _builtin(self, msg: Message) -> bool:
        """Every service answers `<name>.ping` and handles `<name>.disconnect`, and
        answers Flux's per-module methods (modstats.py: stats-get, debug, ...)."""
        if msg.topic == f"{self.name}.ping":
            payload = msg.payload if isinstance(msg.payload, dict) else {}
            hops = [_hop_name(h) for h in msg.route]
            # as Flux's: the payload back, the route, who asked and with what roles
            self.respond(msg, {**payload, "rank": self.ctx.rank, "route": hops,
                               "userid": msg.userid, "rolemask": msg.role})
            return True
        service, _, method = msg.topic.rpartition(".")
        if method == "disconnect" and (service == self.name or service in self.aliases):
            self.disconnect(msg)      # (a client of an alias: kvs-watch, job-list)
            return True
        if method in modstats.METHODS and (service == self.name or service in self.aliases):
            modstats.answer(self, msg, method)
            return True
        return False

    def spawn(self, coro):
        """Run a coroutine owned by this service (cancelled when the service stops)."""
        return self.dispatcher.spawn(coro)

    # replies ----------------------------------------------------------------
    def respond(self, msg: Message, payload=None) -> None:
        self.dispatcher.respond(msg, payload)

    def respond_error(self, msg: Message, errnum: int, errstr: str = "") -> None:
        self.dispatcher.respond_error(msg, errnum, errstr)

    def respond_exception(self, msg: Message, exc: BaseException) -> None:
        """Answer with an error of the tree (its errno and sentence)."""
        self.dispatcher.respond_exception(msg, exc)

    def end_stream(self, msg: Message) -> None:
        self.respond_error(msg, errno.ENODATA)

    no_reply = NO_REPLY

    # streams and client disconnects ---------------------------------------
    def track_stream(self, msg: Message, on_cancel) -> None:
        """Remember a request answered later (a stream, a wait) so that its client's
        disconnect cancels it."""
        self._streams.setdefault(tuple(msg.route), {}).setdefault(msg.matchtag, []).append(
            on_cancel)

    def untrack_stream(self, msg: Message) -> None:
        key = tuple(msg.route)
        entries = self._streams.get(key)
        if entries and entries.pop(msg.matchtag, None) is not None and not entries:
            del self._streams[key]

    def disconnect(self, msg: Message) -> None:
        """A client went away: cancel every stream it opened here."""
        key = tuple(msg.route)
        self.drop_streams(lambda route: route == key)

    def drop_streams(self, match) -> None:
        """Cancel the streams whose route satisfies `match` (a vanished client or subtree)."""
        for route in [r for r in self._streams if match(r)]:
            for cancels in self._streams.pop(route, {}).values():
                for on_cancel in cancels:
                    try:
                        on_cancel()
                    except Exception:
                        self.log.error("stream cancel failed", exc_info=True)

    def is_owner(self, msg: Message) -> bool:
        """Whether the request comes from the instance owner (role and uid both)."""
        return bool(msg.role & OWNER) and msg.userid == self.ctx.owner

    def authorize(self, msg: Message, userid: int, what: str) -> None:
        """Let the instance owner, or the user `userid` (a job's owner), do `what`."""
        if self.is_owner(msg) or msg.userid == userid:
            return
        raise PermissionDenied(f"permission denied: only the owner of {what} or the "
                               "instance owner may do this")

    # calling other services -------------------------------------------------
    def rpc(self, topic: str, payload=None, *, nodeid=None, streaming: bool = False):
        """Start an RPC from this broker; await `.get()` or iterate the result."""
        self.traffic.note_request(topic, payload, nodeid)
        pending = self.ctx.rpc(topic, payload, nodeid=nodeid, streaming=streaming)
        pending.observer = self.traffic
        return pending

    def send(self, topic: str, payload=None, *, nodeid=None) -> None:
        """A request that wants no response."""
        self.traffic.note_request(topic, payload, nodeid)
        self.ctx.send(topic, payload, nodeid=nodeid)


def _hop_name(hop) -> str:
    if isinstance(hop, bytes):
        return "client" if hop else "self"
    return "parent" if hop == -1 else str(hop)
