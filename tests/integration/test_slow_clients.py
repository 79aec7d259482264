"""A client dropped for not reading (broker.client-queue) never hangs: it is told
it was dropped whenever it reads again, however long it stopped, and the requests
it sent after the drop, which the broker did not take, are answered as refused."""

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest
from rawpeer import RawPeer, header, local_endpoint

from fluxlite.protocol import message as m
from fluxlite.testing import _readline, fluxlite_command, wait_fifo

pytestmark = pytest.mark.timeout(240)


@contextlib.contextmanager
def drop_watch(inst):
    """Follows rank 0's log; the function it gives waits for a slow client's drop."""
    with inst.cli_background("dmesg", "-f") as follower:   # the ring, then new entries
        def wait_dropped(timeout=60):
            deadline = time.monotonic() + timeout
            while True:
                line = _readline(follower.stdout, max(0.0, deadline - time.monotonic()))
                assert line, "the non-reading client was never dropped"
                if "dropping a client that does not read" in line:
                    return
        yield wait_dropped


def test_requests_not_taken_after_a_drop_are_answered_as_refused(instance_factory):
    inst = instance_factory(1, setattrs=["broker.client-queue=64"])
    h = inst.handle()
    h.call("kvs.commit", {"ops": [{"key": "big", "value": "v" * (32 << 10)}]})
    with drop_watch(inst) as wait_dropped, \
            RawPeer(local_endpoint(inst), rcvhwm=1, rcvbuf=4096) as slow:
        for tag in range(1, 401):        # 400 answers of 32 KiB: far more than may wait
            slow.send([header(topic="kvs.lookup", matchtag=tag), m._packb({"key": "big"})])
        wait_dropped()
        for tag in range(401, 451):      # sent after the drop: not taken
            slow.send([header(topic="kvs.lookup", matchtag=tag), m._packb({"key": "big"})])
        answered, disconnect = [], None
        deadline = time.monotonic() + 30
        while disconnect is None and time.monotonic() < deadline:
            msg = slow.recv_msg(1.0)
            if msg is None:
                continue
            if msg.type == m.RESPONSE:
                answered.append(msg.matchtag)
            elif msg.type == m.CONTROL and msg.topic == "disconnect":
                disconnect = msg.payload
    assert disconnect is not None, "never told it was dropped"
    assert "client too slow" in disconnect["reason"]
    # every request from the first one not taken on (those sent after the drop
    # among them) is named; every answer came before it
    first_refused = disconnect["refused_from"]
    assert 1 < first_refused <= 401
    assert answered and max(answered) < first_refused
    # and the broker carries on
    assert inst.cli("ping", "-c", "1", "0").returncode == 0


def test_a_run_stopped_past_any_retry_window_fails_clearly_when_it_resumes(
        instance_factory, tmp_path):
    """`fluxlite run` stopped (SIGSTOP) for longer than the broker once kept trying to
    tell it (60 s) used to wait forever after SIGCONT."""
    inst = instance_factory(1, setattrs=["broker.client-queue=256"])
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    script = (f"import time\nfor i in range(30000):\n    print(i)\n"
              f"    if i == 100: open({str(fifo)!r}, 'w').write('go')\n"
              f"    time.sleep(0.0005)\n")
    out = open(tmp_path / "out", "w")
    with drop_watch(inst) as wait_dropped:
        p = subprocess.Popen(fluxlite_command() + ["run", sys.executable, "-u", "-c", script],
                             env=inst.env, stdout=out, stderr=subprocess.PIPE, text=True)
        try:
            assert wait_fifo(str(fifo), 60) == "go"    # output is flowing
            os.kill(p.pid, signal.SIGSTOP)
            wait_dropped()
            stopped_until = time.monotonic() + 65
            while time.monotonic() < stopped_until:
                time.sleep(stopped_until - time.monotonic())   # the stop is the test
            os.kill(p.pid, signal.SIGCONT)
            rc = p.wait(30)
            err = p.stderr.read()
        finally:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
                p.kill()
                p.wait()
            p.stderr.close()
            out.close()
    assert rc != 0
    assert "dropped this connection" in err and "client too slow" in err, err


def _peak_kib(pid: int) -> int:
    """The most a process has ever held resident (VmHWM), in KiB: a transient peak
    shows even after the memory went back."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmHWM for pid {pid}")


def _flood_without_reading(inst, h, wait_dropped, n: int) -> dict:
    """`n` lookups of the 256 KiB "flood" from a client that never reads them, until
    it is dropped and rank 0 has handled what it took; the `disconnect` it is told."""
    with RawPeer(local_endpoint(inst), rcvhwm=1, rcvbuf=4096) as slow:
        for tag in range(1, n + 1):
            slow.send([header(topic="kvs.lookup", matchtag=tag), m._packb({"key": "flood"})])
        wait_dropped()
        h.call("broker.ping", {}, nodeid=0)     # behind what rank 0 took
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = slow.recv_msg(1.0)
            if msg is not None and msg.type == m.CONTROL and msg.topic == "disconnect":
                return msg.payload
    raise AssertionError("the dropped client was never told why")


def test_the_send_queue_is_counted_in_bytes(instance_factory):
    """4,096 messages of 128 KiB once waited for one non-reading client (500 MB of
    rank 0): what waits is bounded in bytes too (broker.client-queue-bytes).  And
    what a client sends costs rank 0 no more for being more: requests are taken
    only as fast as they are handled, so those a dropped client sent after its
    answers piled up are refused, not answered for nobody (each lookup built a
    fresh 340 KiB answer: rank 0's peak grew with the number sent)."""
    inst = instance_factory(1, setattrs=["broker.client-queue-bytes=8M"])
    h = inst.handle()
    pid = inst.broker_pid(0)
    h.call("kvs.commit", {"ops": [{"key": "flood", "value": "v" * (256 << 10)}]})
    peaks, taken = [], []
    with drop_watch(inst) as wait_dropped:
        before = _peak_kib(pid)
        for n in (1000, 4000):      # 250 MB, then 1 GB of answers if all were built
            told = _flood_without_reading(inst, h, wait_dropped, n)
            assert "bytes were waiting" in told["reason"]
            assert "client-queue-bytes" in told["reason"]
            peaks.append(_peak_kib(pid) - before)
            taken.append(told.get("refused_from", n + 1) - 1)   # none: all were taken
    # what rank 0 took on before the drop is what it handled in that time, not
    # what was sent: the 8 MiB of answers (some 25), and what waits to be handled
    assert max(taken) < 250, f"rank 0 took {taken} requests of 1000 and 4000"
    # its peak: the answers that waited (8 MiB) and a bounded backlog, whatever was
    # sent (the 1000 requests taken at once cost some 60 MiB)
    assert max(peaks) < 32 << 10, f"rank 0's peak grew by {peaks} KiB for {taken} requests"
    assert peaks[1] - peaks[0] < 8 << 10, \
        f"rank 0's peak grew by {peaks} KiB: more for 4000 requests than for 1000"


def test_a_reading_client_is_never_dropped_for_bytes(instance_factory):
    inst = instance_factory(1, setattrs=["broker.client-queue-bytes=16M"])
    cp = inst.cli("run", sys.executable, "-c",
                  "import sys\nfor i in range(200): sys.stdout.write('x' * 99999 + '\\n')",
                  timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert len(cp.stdout) == 200 * 100000
