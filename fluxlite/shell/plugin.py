"""The shell's plugin API: objects with callbacks on named topics.

A plugin subclasses ShellPlugin and defines methods named after the topics it
wants, with '.' and '-' turned into '_':

    topic                  when                                          called with
    shell.init             before the init barrier; raise to fail         ()
    shell.start            after every shell started its tasks            ()
    task.init              before a local task is started                 (task)
    task.exec              just before the task's command runs            (task)
    task.exit              a local task exited                            (task)
    shell.critical-ranks   leader: the job's critical shell ranks changed (ranks: set, seq)
    shell.lost             leader: another shell was lost                 (shell_rank, severity,
                                                                           message)
    shell.tasks-complete   leader: every task of the job has exited       ()
    shell.exit             before the shell exits                         ()

Callbacks may be plain functions or coroutines.  Built-ins (doom, output,
signal, instance, pmi, pty) use exactly this API; `-o plugins=PATH[,PATH]` loads a
user's file and instantiates every ShellPlugin subclass defined in it.
A plugin may also answer requests sent to the job's shell service with methods
marked `@handler("name", schema=...)` (the one dispatcher's, as services use):
handler(msg, req) gets the payload checked against the schema, and returns the
response payload, or NO_REPLY to answer later itself.
"""

from __future__ import annotations

import importlib.util
import inspect
import os

from ..errors import PluginError
from ..protocol.dispatch import NO_REPLY, handler

__all__ = ["ShellPlugin", "PluginStack", "PluginError", "NO_REPLY", "handler", "TOPICS"]

TOPICS = ("shell.init", "shell.start", "task.init", "task.exec", "task.exit",
          "shell.critical-ranks", "shell.lost", "shell.tasks-complete", "shell.exit")


def method_name(topic: str) -> str:
    return topic.replace(".", "_").replace("-", "_")




class ShellPlugin:
    """Base class: `self.shell` is the running JobShell (see shell.py for what it offers)."""

    name = "plugin"
    options: dict = {}  # option name -> checker(value) raising ValueError, for user plugins

    def __init__(self, shell):
        self.shell = shell


class PluginStack:
    def __init__(self, shell):
        self.shell = shell
        self.plugins: list[ShellPlugin] = []

    def add(self, plugin: ShellPlugin) -> None:
        self.plugins.append(plugin)

    def load_file(self, path: str) -> list[ShellPlugin]:
        """Import a user plugin file and instantiate its ShellPlugin subclasses."""
        if not os.path.isfile(path):
            raise PluginError(f"plugin {path}: no such file")
        spec = importlib.util.spec_from_file_location(
            f"fluxlite_user_plugin_{len(self.plugins)}", path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise PluginError(f"plugin {path}: {type(exc).__name__}: {exc}") from None
        found = [obj for obj in vars(module).values()
                 if inspect.isclass(obj) and issubclass(obj, ShellPlugin)
                 and obj is not ShellPlugin and obj.__module__ == module.__name__]
        if not found:
            raise PluginError(f"plugin {path}: defines no ShellPlugin subclass")
        out = []
        for cls in found:
            p = cls(self.shell)
            self.add(p)
            out.append(p)
        return out

    async def call(self, topic: str, *args, strict: bool = False) -> None:
        """Run every plugin's callback for `topic`.  With strict, the first failure raises."""
        name = method_name(topic)
        for p in list(self.plugins):
            fn = getattr(p, name, None)
            if fn is None:
                continue
            try:
                rv = fn(*args)
                if inspect.isawaitable(rv):
                    await rv
            except Exception as exc:
                if strict:
                    raise PluginError(f"plugin '{p.name}': {topic} failed: {exc}") from exc
                self.shell.log_error(f"plugin '{p.name}': {topic} failed: "
                                     f"{type(exc).__name__}: {exc}")
