"""instance: what the tasks of a batch/alloc job need to be the brokers of a
nested instance, besides finding each other (that is PMI: the pmi plugin
serves it, and an instance job always has it).

Active when the job's shell option `instance` is set (batch and alloc set it).
Each task's environment says the instance's level (FLUXLITE_INSTANCE_LEVEL),
the cores and GPUs its shell was given (FLUXLITE_INSTANCE_CORES and
FLUXLITE_INSTANCE_GPUS, which the broker puts for rank 0 to offer), and where
its run directory goes (FLUXLITE_RUNDIR_BASE).
The batch script travels in the jobspec; for task 0 the plugin writes it to a
private file and puts its path where the command says {{script}}, so editing
the script after submitting changes nothing.

The script and the brokers' run directories live in the job's private
directory (the shell's `tmpdir`, as Flux's {{tmpdir}}), which the broker's
spawner creates for the shell and removes
once the shell is reaped: nothing is left behind even when the job is
SIGKILLed and no shell.exit runs.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from ...util import idset
from ..plugin import ShellPlugin


class Instance(ShellPlugin):
    name = "instance"

    def __init__(self, shell):
        super().__init__(shell)
        self.tmpdir: str | None = None

    def task_init(self, task) -> None:
        info = self.shell.info
        task.env.update({
            "FLUXLITE_INSTANCE_CORES": idset.encode(info.cores),
            "FLUXLITE_INSTANCE_GPUS": idset.encode(info.gpus),
            "FLUXLITE_INSTANCE_LEVEL": str(info.instance_level + 1),
            "FLUXLITE_RUNDIR_BASE": self.shell.tmpdir or "",
        })

    def task_exec(self, task) -> None:
        if "{{script}}" in task.argv and task.rank == 0:
            script = self.shell.jobspec["attributes"]["system"].get("batch", {}).get("script")
            if script is not None:
                tmpdir = self.shell.tmpdir
                if not tmpdir:  # a shell started without one: ours to remove at exit
                    tmpdir = self.tmpdir = tempfile.mkdtemp(prefix="fl-job-")
                path = os.path.join(tmpdir, "script")
                with open(path, "w") as f:
                    f.write(script)
                os.chmod(path, 0o700)
                task.argv = [path if a == "{{script}}" else a for a in task.argv]

    def shell_exit(self) -> None:
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
