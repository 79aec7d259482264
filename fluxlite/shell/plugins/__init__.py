"""Built-in shell plugins, in the order they run.  They use the same API as user
plugins (shell/plugin.py)."""

from __future__ import annotations


def builtin_plugins(shell) -> list:
    from .doom import Doom
    from .output import Output
    from .signals import SignalForwarder
    plugins = [Output, SignalForwarder, Doom]
    if shell.options.get("input") or shell.options.get("input.path") or \
            shell.options.get("input.stdin.type"):
        from .input import Input
        plugins.insert(0, Input)
    if shell.options.get("instance"):
        from .instance import Instance
        plugins.insert(0, Instance)
    # the brokers of an instance find each other through PMI, whatever -o pmi says
    if shell.options.get("instance") or shell.options.get("pmi", "simple") != "off":
        from .pmi import PMI
        plugins.append(PMI)
    opts = shell.options
    if "rlimit" in opts or "signal" in opts or "files" in shell.jobspec["attributes"]["system"] \
            or any(k.startswith("rlimit.") for k in opts):
        from .limits import Limits
        plugins.insert(0, Limits)
    if shell.is_leader and any(k == "pty" or k.startswith("pty.") for k in opts):
        from .pty import Pty
        plugins.insert(0, Pty)
    return plugins
