"""Built-in shell plugins, in the order they run.  They use the same API as user
plugins (shell/plugin.py): each sees the shell only through its ShellContext."""

from __future__ import annotations


def builtin_plugins(shell) -> list:
    """The plugin classes a shell loads, for its ShellContext `shell`."""
    from .affinity import Affinity
    from .doom import Doom
    from .output import Output
    from .signals import SignalForwarder
    plugins = [Output, SignalForwarder, Doom, Affinity]
    if shell.options.get("input") or shell.options.get("input.path") or \
            shell.options.get("input.stdin.type"):
        from .input import Input
        plugins.insert(0, Input)
    if shell.options.get("instance"):
        from .instance import Instance
        plugins.insert(0, Instance)
    # the brokers of an instance find each other through PMI, whatever -o pmi says;
    # the pmi plugin is also the exchange between shells that pmix uses
    methods = pmi_offered(shell.options, shell.ntasks)
    if shell.options.get("instance") or methods:
        from .pmi import PMI
        plugins.append(PMI)
    if "pmix" in methods:
        from .pmix import PMIx
        plugins.append(PMIx)
    opts = shell.options
    if "rlimit" in opts or "signal" in opts or "files" in shell.jobspec["attributes"]["system"] \
            or "oom.adjust" in opts or any(k.startswith("rlimit.") for k in opts):
        from .limits import Limits
        plugins.insert(0, Limits)
    if shell.is_leader and any(k == "pty" or k.startswith("pty.") for k in opts):
        from .pty import Pty
        plugins.insert(0, Pty)
    return plugins


def pmi_offered(options, ntasks: int) -> list[str]:
    """The PMI methods offered to the job's tasks (-o pmi=LIST).  The default offers
    both at once to a job of several tasks, so MPICH (PMI-1 on PMI_FD) and Open MPI
    (PMIx's environment) programs start without options: each reads only its own
    variables.  pmix is in the default only where OpenPMIx is installed, not for an
    instance's brokers (batch, alloc: they speak PMI-1), and not for a job of one
    task, whose program is a world of one either way: a PMIx server costs each
    shell about 13 ms of CPU to start, more than the rest of a one-task shell's
    life (`pmi=pmix` asks for it)."""
    from ...job.shell_options import pmi_list
    offered = pmi_list(options.get("pmi"))
    if offered is None:
        offered = ["simple"]
        if ntasks > 1 and not options.get("instance"):
            from ...pmi import pmix_build
            if pmix_build.available():
                offered.append("pmix")
    return offered
