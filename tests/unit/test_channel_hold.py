"""A channel given `hold` takes nothing while its owner is busy: what waits stays
in the socket, and is taken, in order, once the owner is free again (the local
endpoint holds while the router's queue for in-broker services is long)."""

import asyncio
import contextlib

import pytest
import zmq

from fluxlite.protocol.frames import has_input
from fluxlite.protocol.transport import Channel

pytestmark = pytest.mark.timeout(30)


@contextlib.contextmanager
def held_channel(name: str, on_frames, hold):
    """A Channel (with `hold`) on one end of an inproc pair; yields (channel, sender)."""
    ctx = zmq.Context()
    rx, tx = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    rx.bind(f"inproc://{name}")
    tx.connect(f"inproc://{name}")
    ch = Channel(rx, on_frames, hold=hold)
    try:
        yield ch, tx
    finally:
        ch.close(linger=0)
        tx.close(linger=0)
        ctx.term()


def test_a_held_channel_leaves_messages_in_the_socket_until_its_owner_is_free():
    async def main():
        busy = [True]
        got: list[bytes] = []
        all_in = asyncio.get_running_loop().create_future()

        def on_frames(frames):
            got.append(frames[0])
            if len(got) == 5 and not all_in.done():
                all_in.set_result(None)

        with held_channel("held", on_frames, lambda: busy[0]) as (ch, tx):
            for i in range(5):
                tx.send(b"%d" % i)
            for _ in range(20):               # turns of the loop, the channel's among them
                await asyncio.sleep(0)
            assert got == [] and has_input(ch.sock)     # nothing taken: all still waiting
            busy[0] = False
            await asyncio.wait_for(all_in, 10)
            assert got == [b"0", b"1", b"2", b"3", b"4"]

    asyncio.run(main())


def test_a_channel_stops_taking_as_soon_as_its_owner_becomes_busy():
    async def main():
        got: list[bytes] = []
        first_three = asyncio.get_running_loop().create_future()

        def on_frames(frames):
            got.append(frames[0])
            if len(got) == 3:
                first_three.set_result(None)

        # each one makes work
        with held_channel("filling", on_frames, lambda: len(got) >= 3) as (_, tx):
            for i in range(10):
                tx.send(b"%d" % i)
            await asyncio.wait_for(first_three, 10)
            for _ in range(20):
                await asyncio.sleep(0)
            assert got == [b"0", b"1", b"2"]   # not the ten in one drain

    asyncio.run(main())
