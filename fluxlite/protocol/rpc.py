"""The one RPC helper: matchtags, response demultiplexing, streams.

`RPCTracker` hands out matchtags and routes each response to its
`PendingRPC`.  A PendingRPC collects responses; a plain RPC is done after one,
a streaming RPC when an error arrives (ENODATA means it ended cleanly and is
raised as EndOfStream).  The waiting is left to the driver: the async handle
awaits `next()`, the blocking handle polls its socket until `ready()`.
"""

from __future__ import annotations

import collections

from ..errors import EndOfStream
from ..protocol.message import Message


class PendingRPC:
    __slots__ = ("matchtag", "topic", "streaming", "done", "_queue", "_waiter", "_tracker",
                 "on_response", "observer")

    def __init__(self, tracker: RPCTracker, matchtag: int, topic: str, streaming: bool):
        self._tracker = tracker
        self.matchtag = matchtag
        self.topic = topic
        self.streaming = streaming
        self.done = False
        self._queue: collections.deque | None = None  # made by the first queued response
        self._waiter = None  # an asyncio future while an async caller awaits
        # callback(msg) for callers that dispatch instead of waiting, set as soon as
        # the RPC is made: no answer comes before (a handle reads its socket, and a
        # broker hands its services' answers over, on a later turn of the loop)
        self.on_response = None
        self.observer = None   # a broker service's Traffic: told of each response

    # fed by the tracker
    def feed(self, msg: Message) -> None:
        if self.done:
            return
        if self.observer is not None:
            self.observer.note("rx", msg)
        if not self.streaming or msg.errnum:
            self.done = True
        if self.on_response is not None:
            self.on_response(msg)
            return
        if self._queue is None:
            self._queue = collections.deque()
        self._queue.append(msg)
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def ready(self) -> bool:
        return bool(self._queue)

    def take(self):
        """Pop the next response: its payload, or raise its error (EndOfStream for ENODATA)."""
        msg = self._queue.popleft()
        if msg.errnum:
            raise msg.error()
        return msg.payload

    # async driver
    async def next(self):
        import asyncio  # only async callers pay for it; the CLI never does
        while not self._queue:
            if self.done:
                raise EndOfStream("stream already ended")
            loop = asyncio.get_running_loop()
            self._waiter = loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self.take()

    async def get(self):
        """Await the single response of a plain RPC."""
        return await self.next()

    def __aiter__(self):
        return self

    async def __anext__(self):
        try:
            return await self.next()
        except EndOfStream:
            raise StopAsyncIteration from None

    def cancel(self) -> None:
        """Stop tracking (the caller no longer cares about responses)."""
        self.done = True
        self._tracker.forget(self.matchtag)


class RPCTracker:
    def __init__(self):
        self._next = 1
        self._pending: dict[int, PendingRPC] = {}

    def new(self, topic: str, streaming: bool = False) -> PendingRPC:
        tag = self._next
        self._next = tag + 1 if tag < 0x7FFFFFFF else 1
        p = PendingRPC(self, tag, topic, streaming)
        self._pending[tag] = p
        return p

    def dispatch(self, msg: Message) -> bool:
        """Deliver a response; False if no RPC is waiting for its matchtag."""
        p = self._pending.get(msg.matchtag)
        if p is None:
            return False
        p.feed(msg)
        if p.done:
            self._pending.pop(msg.matchtag, None)
        return True

    def forget(self, matchtag: int) -> None:
        self._pending.pop(matchtag, None)

    def fail_all(self, errnum: int, errstr: str) -> None:
        """Fail every outstanding RPC (e.g. the connection to the broker is gone)."""
        self._fail(list(self._pending), errnum, errstr)

    def fail_from(self, matchtag: int, errnum: int, errstr: str) -> None:
        """Fail the outstanding RPCs sent at or after `matchtag` (matchtags rise in
        sending order; one that wrapped around past the largest counts as later)."""
        wrapped = self._next <= matchtag
        self._fail([t for t in self._pending
                    if t >= matchtag or (wrapped and t < self._next)], errnum, errstr)

    def _fail(self, tags: list[int], errnum: int, errstr: str) -> None:
        for t in tags:
            p = self._pending.pop(t)
            m = Message.request(p.topic).response(None, errnum, errstr)
            m.matchtag = t
            p.feed(m)

    def __len__(self) -> int:
        return len(self._pending)
