"""CPU and GPU affinity: each task runs on the cores and sees the GPUs it was given.

Shell options (as Flux's):

    cpu-affinity   on (default): every task is bound to all of the job's cores on
                   this node; per-task: the cores are shared out among the local
                   tasks, in blocks; off: no binding; map:LIST: task i gets the
                   i-th of LIST's semicolon-separated core idsets (0-1;2-3).
                   `verbose,` first logs the cores of the shell and of each task;
                   `dry-run,` logs them and binds nothing
    gpu-affinity   on (default): CUDA_VISIBLE_DEVICES (and ROCR_VISIBLE_DEVICES
                   where AMD's /dev/kfd exists) names all of the job's GPUs on
                   this node, and is -1 for a job with none here (so that it uses
                   no GPU it was not given), with CUDA_DEVICE_ORDER=PCI_BUS_ID
                   unless the job sets it; per-task: the GPUs are shared out among
                   the local tasks; off: the variables are left as the job's
                   environment has them; map:LIST as for cpu-affinity

GPU ids in R count the GPUs the instance's brokers see; where the shell
itself was started with CUDA_VISIBLE_DEVICES (a nested or restricted
instance), R's id i is the shell's i-th visible device.  Binding sets the
shell's own affinity around the task's fork, so the task runs on its cores
from its first instruction; cores the machine does not have (a configured
node larger than this host) are left out, and a task none of whose cores
exist here is not bound.
"""

from __future__ import annotations

import os

from ...job.shell_options import affinity
from ...util import idset
from ..plugin import ShellPlugin


def share(ids: list[int], ntasks: int, mode, localid: int) -> list[int] | None:
    """The ids task `localid` of `ntasks` gets under `mode` (None: leave it alone)."""
    if mode in (1, True):
        mode = "on"
    if mode == "off" or not ids:
        return None
    if mode == "on":
        return list(ids)
    if mode == "per-task":
        each, extra = divmod(len(ids), ntasks)
        if each == 0:   # fewer ids than tasks: tasks share them round robin
            return [ids[localid % len(ids)]]
        start = localid * each + min(localid, extra)
        return ids[start:start + each + (1 if localid < extra else 0)]
    parts = mode[4:].split(";")
    return sorted(idset.decode(parts[localid % len(parts)]))


class Affinity(ShellPlugin):
    name = "affinity"

    def __init__(self, shell):
        super().__init__(shell)
        opts = shell.options
        self.cpu_mode, flags = affinity(opts.get("cpu-affinity", "on"), flags=True)
        self.cpu_verbose = bool(flags)
        self.cpu_dry_run = "dry-run" in flags
        self.gpu_mode = opts.get("gpu-affinity", "on")
        self.cores = list(shell.info.cores)
        self.gpus = list(shell.info.gpus)
        try:
            self.usable = os.sched_getaffinity(0)
        except OSError:
            self.usable = set()
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        self.devices = [d.strip() for d in visible.split(",")] if visible else None
        self.amd = os.path.exists("/dev/kfd")

    def _device(self, gpu: int) -> str:
        if self.devices is not None and gpu < len(self.devices):
            return self.devices[gpu]
        return str(gpu)

    def shell_init(self) -> None:
        if self.cpu_verbose and self.cpu_mode not in ("off", 0, False):
            self.shell.log(f"cpus: {idset.encode(set(self.cores) & self.usable)}")

    def task_init(self, task) -> None:
        n = self.shell.nlocal
        if self.gpu_mode != "off":
            task.env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
        gpus = share(self.gpus, n, self.gpu_mode, task.localid)
        if gpus is not None:
            value = ",".join(self._device(g) for g in gpus)
            task.env["CUDA_VISIBLE_DEVICES"] = value
            if self.amd:
                task.env["ROCR_VISIBLE_DEVICES"] = value
        elif self.gpu_mode != "off":  # no GPU here for this job: none to use
            task.env["CUDA_VISIBLE_DEVICES"] = "-1"
        cores = share(self.cores, n, self.cpu_mode, task.localid)
        if cores is not None:
            here = set(cores) & self.usable
            if self.cpu_verbose and here:
                self.shell.log(f"task {task.rank}: cpus: {idset.encode(here)}")
            if here and not self.cpu_dry_run:
                task.cpus = here
