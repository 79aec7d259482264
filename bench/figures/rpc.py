"""Messaging: broker.ping round trips (figure 3), RPC rates beside a bare ZeroMQ
rate (figure 4), and the slowest ping while the largest jobspec is submitted
(figure 12).

bench/README.md says what each figure measures and why.
"""

from __future__ import annotations

import collections
import os
import signal
import statistics
import time

from bench.common import (
    Row,
    median,
    progress,
)
from fluxlite.jobapi import api
from fluxlite.testing import (
    Instance,
)


def _ping_samples(h, nodeid: int, count: int) -> list[float]:
    for _ in range(5):  # warm-up: connections and routes
        h.call("broker.ping", {"seq": 0}, nodeid=nodeid, timeout=10)
    out = []
    for seq in range(count):
        t0 = time.perf_counter()
        h.call("broker.ping", {"seq": seq}, nodeid=nodeid, timeout=10)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def fig_ping(rows: list, quick: bool, ctx: dict) -> None:
    """3. broker.ping round trip from a client of rank 0: to rank 15 (4 hops down) and rank 0."""
    count = 50 if quick else 200
    try:
        with Instance(16, topo="kary:2") as inst:
            h = inst.handle()
            level = inst.getattr("tbon.level", 15)
            for nodeid, label in ((15, f"ping rank 0 -> 15 (kary:2, level {level})"),
                                  (0, "ping rank 0 -> 0")):
                s = _ping_samples(h, nodeid, count)
                route = h.call("broker.ping", nodeid=nodeid, timeout=10).get("route", [])
                progress("ping", f"rank {nodeid}: median {median(s):.3f} ms over {count} "
                                 f"(route {route})")
                rows.append(Row("3", label, median(s), "ms", samples=[round(x, 4) for x in s],
                                note=f"median of {count}; p90 "
                                     f"{statistics.quantiles(s, n=10)[-1]:.3f} ms; "
                                     f"route {route}"))
    except Exception as exc:
        rows.append(Row("3", "ping", None, "ms", error=str(exc)))


def fig_rpc(rows: list, quick: bool, ctx: dict) -> None:
    """4. broker.ping RPCs per second from one client to rank 0: sequential and pipelined."""
    duration = 0.5 if quick else 2.0
    depth = 64
    try:
        with Instance(1) as inst:
            h = inst.handle()
            for _ in range(50):
                h.call("broker.ping", nodeid=0, timeout=10)
            # (a) sequential, in windows alternating with bare ZeroMQ round trips (4c)
            # so that both see the same machine: on a 2-core VM one window can be
            # halved by work elsewhere, so each figure is the median of its windows
            rates, bare_rates = [], []
            with BareEcho() as bare:
                for _ in range(WINDOWS):
                    n, t0 = 0, time.perf_counter()
                    end = t0 + duration / WINDOWS
                    while time.perf_counter() < end:
                        h.call("broker.ping", nodeid=0, timeout=10)
                        n += 1
                    rates.append(n / (time.perf_counter() - t0))
                    bare_rates.append(bare.rate(duration / WINDOWS))
            rate, floor = statistics.median(rates), statistics.median(bare_rates)
            ratio = statistics.median(a / b for a, b in zip(rates, bare_rates))
            progress("rpc", "sequential: " + ", ".join(f"{r:,.0f}" for r in rates) +
                     "/s; bare ZeroMQ: " + ", ".join(f"{r:,.0f}" for r in bare_rates) + "/s")
            rows.append(Row("4a", "RPC/s sequential", rate, "rpc/s", op=">=", bound=5000,
                            samples=rates, note=f"median of {WINDOWS} windows of "
                                                f"{duration / WINDOWS:g} s; {ratio:.0%} of the "
                                                "bare ZeroMQ rate measured beside it (4c)"))
            rows.append(Row("4c", "bare ZeroMQ round trips/s (floor)", floor, "rpc/s",
                            samples=bare_rates,
                            note="two processes, DEALER->ROUTER over ipc://, echo, no fluxlite: "
                                 "the ceiling for 4a on this machine at that moment"))
            # (b) pipelined: keep `depth` in flight, wait for the oldest
            inflight = collections.deque()
            n, t0 = 0, time.perf_counter()
            end = t0 + duration
            while True:
                now = time.perf_counter()
                while len(inflight) < depth and now < end:
                    inflight.append(h.rpc("broker.ping", nodeid=0))
                if not inflight:
                    break
                p = inflight.popleft()
                h.wait(p, timeout=10)
                p.take()
                n += 1
            rate = n / (time.perf_counter() - t0)
            progress("rpc", f"pipelined ({depth} in flight): {n} calls, {rate:,.0f}/s")
            rows.append(Row("4b", f"RPC/s pipelined ({depth} in flight)", rate, "rpc/s",
                            op=">=", bound=5000, note=f"{n} calls in {duration:g} s"))
    except Exception as exc:
        rows.append(Row("4", "RPC/s", None, "rpc/s", op=">=", bound=5000, error=str(exc)))


WINDOWS = 5  # sequential rates: the median of this many windows


class BareEcho:
    """Bare pyzmq sockets in two processes (a forked ROUTER that echoes, a DEALER):
    sequential round trips with no fluxlite code, what 4a would be if fluxlite
    cost nothing."""

    def __enter__(self):
        import tempfile

        import zmq
        self.dir = tempfile.mkdtemp(prefix="fl-bench-")
        endpoint = f"ipc://{self.dir}/echo"
        self.pid = os.fork()
        if self.pid == 0:  # the echo server: a fresh context after the fork
            try:
                ctx = zmq.Context()
                sock = ctx.socket(zmq.ROUTER)
                sock.bind(endpoint)
                while True:
                    frames = sock.recv_multipart()
                    sock.send_multipart(frames)
                    if frames[-1] == b"quit":
                        break
                # os._exit would drop the echoed "quit" still queued in the I/O thread
                sock.close(linger=2000)
                ctx.term()
            finally:
                os._exit(0)
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.connect(endpoint)
        self.rate(0.05)  # warm up
        return self

    def rate(self, duration: float) -> float:
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < duration:
            self.sock.send_multipart([b"header", b"x"])
            self.sock.recv_multipart()
            n += 1
        return n / (time.perf_counter() - t0)

    def __exit__(self, *exc):
        try:
            self.sock.send_multipart([b"quit"])
            if not self.sock.poll(5000):   # no echo: never hang the bench on it
                os.kill(self.pid, signal.SIGKILL)
        finally:
            self.sock.close(linger=0)
            self.ctx.term()
            os.waitpid(self.pid, 0)
            import shutil
            shutil.rmtree(self.dir, ignore_errors=True)


def fig_ping_under_load(rows: list, quick: bool, ctx: dict) -> None:
    """12. broker.ping to rank 0 while another client keeps submitting the largest
    jobspec job-manager.submit accepts (a ~1 MiB environment, its payload limit:
    decoding and validating it is the most work one valid request costs the loop)."""
    import threading

    from fluxlite.job.jobspec import Jobspec
    count = 50 if quick else 200
    try:
        with Instance(2) as inst:
            env = {f"V{i}": "x" * 1000 for i in range(1000)}
            spec = Jobspec.from_command(["true"], environment=env).jobspec
            stop = threading.Event()
            submitted, failed = [0], []

            def load():
                from fluxlite.client.sync import Handle
                h2 = Handle(inst.uri)   # a Handle belongs to its thread, closed there
                try:
                    while not stop.is_set():
                        api.submit(h2, spec)
                        submitted[0] += 1
                except Exception as exc:  # reported below: no load, no figure
                    failed.append(exc)
                finally:
                    h2.close()

            t = threading.Thread(target=load, daemon=True)
            t.start()
            h = inst.handle()
            try:
                while submitted[0] == 0 and t.is_alive():
                    h.call("broker.ping", {"seq": 0}, nodeid=0, timeout=10)
                s = _ping_samples(h, 0, count)
            finally:
                stop.set()
                t.join(60)
            if failed or not submitted[0]:
                raise RuntimeError(f"the loading client failed: {failed[:1]}")
            worst = max(s)
            progress("ping-load", f"median {median(s):.3f} ms, max {worst:.3f} ms over "
                                  f"{count} pings; {submitted[0]} large jobs submitted")
            rows.append(Row("12", "ping rank 0 during largest valid submits (max)", worst,
                            "ms", op="<", bound=100.0, samples=[round(x, 4) for x in s],
                            note=f"median {median(s):.3f} ms over {count}; "
                                 f"{submitted[0]} submits of a 1 MiB jobspec"))
    except Exception as exc:
        rows.append(Row("12", "ping during largest valid submits", None, "ms", error=str(exc)))
