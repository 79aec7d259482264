"""The benchmark's figures, one module per family, and the table of their names
(what `bench/run.py --only` and `--list` take), in the order a full run runs them.
"""

from __future__ import annotations

from bench.figures import failure, hosts, jobs, memory, mpi, rpc, start, state

FIGURES = {
    "start": start.fig_start,
    "lost": failure.fig_lost,
    "ping": rpc.fig_ping,
    "rpc": rpc.fig_rpc,
    "rss": memory.fig_rss,
    "run": jobs.fig_run,
    "throughput": jobs.fig_throughput,
    "jobmem": memory.fig_jobmem,
    "output-rss": memory.fig_output_rss,
    "many-jobs": memory.fig_many_jobs,
    "chain": jobs.fig_chain,
    "nested": start.fig_nested,
    "gone": failure.fig_gone,
    "critical": failure.fig_critical,
    "ping-load": rpc.fig_ping_under_load,
    "mpi": mpi.fig_mpi,
    "executor": jobs.fig_executor,
    "hosts": hosts.fig_hosts,
    "srun": hosts.fig_srun,
    "state": state.fig_state,
    "backlog": jobs.fig_backlog,
}
