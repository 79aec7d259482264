"""Real hosts and clusters: four network-namespace hosts over TCP and CURVE,
started by config and by Hydra (figure 15), and a private Slurm cluster's
`srun` (figure 16).

bench/README.md says what each figure measures and why.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time

from bench.common import (
    ROOT,
    Row,
    median,
    progress,
    run_timed,
)
from fluxlite.testing import (
    TAG_VAR,
    fluxlite_command,
)
from fluxlite.util import idset


def _hosts_config(d: str, hosts, cert: str) -> str:
    path = os.path.join(d, "conf.toml")
    with open(path, "w") as f:
        f.write(f'[bootstrap]\ncurve_cert = "{cert}"\ndefault_port = 8050\n'
                f'default_bind = "tcp://eth0:%p"\ndefault_connect = "tcp://%h:%p"\n'
                f'hosts = [{{host = "{hosts.hostlist}"}}]\n')
    return path


def _hosts_start(hosts, conf: str, command: list[str], rundir: str | None = None):
    """Brokers on hosts 1-3, then rank 0 on host 0 (with COMMAND); returns the procs."""
    null = subprocess.DEVNULL
    procs = [hosts.popen(hosts[i], fluxlite_command() + ["broker", "--config-path", conf],
                         stdin=null, stdout=null, stderr=null) for i in (1, 2, 3)]
    extra = ["--rundir", rundir, "-Slog-stderr-level=info"] if rundir else []
    procs.insert(0, hosts.popen(hosts[0], fluxlite_command() + ["broker", "--config-path",
                                                                conf, *extra, *command],
                                stdin=null, stdout=null,
                                stderr=subprocess.PIPE if rundir else null, text=True))
    return procs


def _hosts_lost_sample(hosts, conf: str, rundir: str, how: str) -> float:
    """A fresh service instance with the TCP defaults; kill -9 rank 3's broker or cut
    host 2's link; seconds until rank 0 reports the rank lost."""
    from fluxlite.client.sync import Handle
    procs = _hosts_start(hosts, conf, [], rundir)
    h = None
    try:
        deadline = time.monotonic() + 60
        fd, seen = procs[0].stderr.fileno(), b""
        while b"->run" not in seen:                # every wait here is bounded
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise RuntimeError("rank 0 did not reach run within 60 s")
            chunk = os.read(fd, 65536)             # raw reads: no buffered line unseen
            if not chunk:
                raise RuntimeError(f"rank 0 exited {procs[0].wait(10)} before run")
            seen = seen[-4096:] + chunk
        import threading  # keep reading rank 0's log lines: a full pipe would block it
        threading.Thread(target=procs[0].stderr.read, daemon=True).start()
        h = Handle(f"local://{rundir}/local")
        # before the stream (one RPC at a time), bounded: a hang becomes an error row
        pid3 = int(h.call("attr.get", {"name": "broker.pid"}, nodeid=3,
                          timeout=30)["value"])
        stream = h.stream("overlay.watch", nodeid=0, timeout=180)
        deadline = time.monotonic() + 60
        for snap in stream:
            if idset.decode(snap["ranks"].get("online", "")) == {0, 1, 2, 3}:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"not all 4 ranks online within 60 s: {snap['ranks']}")
        rank = 3 if how == "kill" else 2
        t0 = time.monotonic()
        if how == "kill":
            os.kill(pid3, signal.SIGKILL)
        else:
            hosts.cut(hosts[2])
        for snap in stream:        # each snapshot within 180 s, and all within 180 s
            if rank in idset.decode(snap["ranks"].get("lost", "")):
                dt = time.monotonic() - t0
                break
            if time.monotonic() - t0 > 180:
                raise RuntimeError(f"rank {rank} not reported lost within 180 s")
        else:
            raise RuntimeError(f"rank {rank} not reported lost")
        stream.close()
        return dt
    finally:
        if not hosts.link_is_up(hosts[2]):
            hosts.restore(hosts[2])
        if h is not None:
            h.close()
        env = dict(os.environ, FLUXLITE_URI=f"local://{rundir}/local")
        subprocess.run(fluxlite_command() + ["shutdown"], env=env, timeout=60,
                       capture_output=True)
        for p in procs:
            try:
                p.wait(90)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _hosts_hydra_starts(hosts, reps: int, ipc64: list) -> dict:
    """`mpiexec.hydra -n N fluxlite start true` with N/4 brokers on each of the 4 hosts (Hydra's
    ssh launcher through tests/programs/netns-exec), N = 4 and 64, beside `start --size 64
    true` on one host (appended to IPC64).  {N: samples, or the error text}."""
    import shutil
    out: dict[int, list[float] | str] = {}
    if shutil.which("mpiexec.hydra") is None:
        return {n: "mpiexec.hydra is not installed (apt-get install mpich)" for n in (4, 64)}
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PMI_") and k != "FLUXLITE_URI"}
    env[TAG_VAR] = hosts.tag          # the namespace hosts' teardown finds what is left
    netns_exec = os.path.join(ROOT, "tests", "programs", "netns-exec")
    for n in (4, 64):
        argv = ["mpiexec.hydra", "-launcher", "ssh", "-launcher-exec", netns_exec,
                "-hosts", ",".join(f"{h}:{n // 4}" for h in hosts.names),
                "-iface", hosts.bridge, "-n", str(n), *fluxlite_command(), "start", "true"]
        try:
            out[n] = [run_timed(argv, env, 60 + 3 * n) for _ in range(reps)]
            progress("hosts", f"mpiexec.hydra -n {n} start true: {median(out[n]):.3f} s")
        except Exception as exc:
            out[n] = str(exc)
    plain = dict(env)
    plain.pop(TAG_VAR)
    for _ in range(reps):
        ipc64.append(run_timed(fluxlite_command() + ["start", "--size", "64", "true"],
                               plain, 240))
    progress("hosts", f"start --size 64 true on one host: {median(ipc64):.3f} s")
    return out


def fig_hosts(rows: list, quick: bool, ctx: dict) -> None:
    """15. 4 network-namespace hosts over TCP+CURVE: start, lost.

    Start by `broker --config-path` and by Hydra (4 and 64 brokers) beside ipc on one
    host; kill -9 / link cut -> lost with the TCP defaults."""
    import tempfile

    from fluxlite.testing.netns import NetnsHosts
    if os.geteuid() != 0:
        rows.append(Row("15", "config bootstrap across 4 hosts", None, "s",
                        error="network-namespace hosts need root"))
        return
    reps = 2 if quick else 5
    starts, ipc, kills, cuts = [], [], [], []
    hydra: dict[int, list[float] | str] = {}
    ipc64: list[float] = []
    try:
        with tempfile.TemporaryDirectory(prefix="fluxlite-bench-hosts.") as d, \
                NetnsHosts(4) as hosts:
            cert = os.path.join(d, "curve.cert")
            subprocess.run(fluxlite_command() + ["keygen", cert], check=True, timeout=60)
            conf = _hosts_config(d, hosts, cert)
            for i in range(reps):
                t0 = time.perf_counter()
                procs = _hosts_start(hosts, conf, ["true"])
                codes = [p.wait(120) for p in procs]
                if any(codes):
                    raise RuntimeError(f"broker exit codes {codes}")
                starts.append(time.perf_counter() - t0)
                env = dict(os.environ)
                env.pop("FLUXLITE_URI", None)
                ipc.append(run_timed(fluxlite_command() + ["start", "--size", "4", "true"],
                                     env, 120))
                progress("hosts", f"start run {i + 1}/{reps}: tcp {starts[-1]:.3f} s, "
                                  f"ipc {ipc[-1]:.3f} s")
            hydra = _hosts_hydra_starts(hosts, reps, ipc64)
            for i in range(reps):
                for how, out in (("kill", kills), ("cut", cuts)):
                    rundir = os.path.join(d, f"r-{how}-{i}")
                    out.append(_hosts_lost_sample(hosts, conf, rundir, how))
                progress("hosts", f"lost {i + 1}/{reps}: kill {kills[-1]:.3f} s, "
                                  f"cut {cuts[-1]:.1f} s")
    except Exception as exc:
        rows.append(Row("15", "config bootstrap across 4 hosts", None, "s", error=str(exc)))
        return
    note = f"median of {reps}"
    rows.append(Row("15a", "4 hosts tcp+curve: broker --config-path ... true", median(starts),
                    "s", flux_core="-", samples=starts, note=note))
    rows.append(Row("15b", "1 host ipc: start --size 4 true", median(ipc), "s",
                    flux_core="-", samples=ipc, note=note))
    rows.append(Row("15c", "tcp: kill -9 leaf -> lost", median(kills), "s", op="<",
                    bound=1.0, flux_core="-", samples=kills, note=note))
    rows.append(Row("15d", "tcp: link cut -> lost (lost-timeout 60s)", median(cuts), "s",
                    op="<=", bound=61.0, flux_core="-", samples=cuts,
                    note=f"{note}; TCP defaults"))
    for fig, n in (("15e", 4), ("15f", 64)):
        name = f"4 hosts tcp+curve: mpiexec.hydra -n {n} fluxlite start true ({n // 4} per host)"
        if isinstance(hydra.get(n), list):
            rows.append(Row(fig, name, median(hydra[n]), "s", flux_core="-",
                            samples=hydra[n], note=f"{note}; Hydra over netns-exec"))
        else:
            rows.append(Row(fig, name, None, "s", flux_core="-", error=hydra.get(n, "not run")))
    if ipc64:
        rows.append(Row("15g", "1 host ipc: start --size 64 true", median(ipc64), "s",
                        flux_core="-", samples=ipc64, note=note))


def fig_srun(rows: list, quick: bool, ctx: dict) -> None:
    """16. `srun -N4 --mpi=pmi2 fluxlite start true` beside `srun -N4 true`, in a private
    4-node Slurm cluster (fluxlite.testing.slurm: four slurmd on this machine)."""
    from fluxlite.testing.slurm import SlurmCluster
    reps = 2 if quick else 5
    argv = {"true": ["srun", "-N4", "true"],
            "start": ["srun", "-N4", "--mpi=pmi2", *fluxlite_command(), "start", "true"]}
    samples: dict[str, list[float]] = {k: [] for k in argv}
    try:
        with SlurmCluster(nodes=4) as cluster:       # its stop() checks nothing is left
            run_timed(argv["true"], cluster.env, 120)                     # warm-up
            for _i in range(reps):
                for key in argv:
                    samples[key].append(run_timed(argv[key], cluster.env, 120))
            progress("srun", " ".join(f"{k}={median(v):.3f}" for k, v in samples.items()))
    except Exception as exc:
        rows.append(Row("16", "srun -N4 --mpi=pmi2 fluxlite start true", None, "s",
                        flux_core="-", error=str(exc)))
        return
    note = f"median of {reps}, 4 slurmd on one machine"
    rows.append(Row("16a", "srun -N4 true", median(samples["true"]), "s", flux_core="-",
                    samples=samples["true"], note=note))
    rows.append(Row("16b", "srun -N4 --mpi=pmi2 fluxlite start true",
                    median(samples["start"]), "s", flux_core="-", samples=samples["start"],
                    note=note))
