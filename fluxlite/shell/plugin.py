"""The shell's plugin API: objects with callbacks on named topics.

A plugin subclasses ShellPlugin and defines methods named after the topics it
wants, with '.' and '-' turned into '_' (the table HOOKS, one entry a topic):

    topic                  when                                          called with
    shell.init             before the init barrier; raise to fail         ()
    shell.start            after every shell started its tasks            ()
    task.init              before a local task is started                 (task)
    task.exec              just before the task's command runs            (task)
    task.exit              a local task exited                            (task)
    shell.signal           the shell received a signal (after passing     (signum)
                           it on to the tasks); a plain function
    shell.critical-ranks   leader: the job's critical shell ranks changed (ranks: set, seq)
    shell.lost             leader: another shell was lost                 (shell_rank, severity,
                                                                           message)
    shell.tasks-complete   leader: every task of the job has exited       ()
    shell.exit             before the shell exits                         ()

Callbacks may be plain functions or coroutines.  A plugin may also subscribe a
callback to a topic while it runs (`ShellContext.subscribe`).  A method whose
name is in a topic's namespace (`shell_*`, `task_*`) but names no topic (a
misspelled `task_exited`), or a hook that cannot take its topic's arguments, is
refused when the plugin is loaded, in one line listing the valid names: it
would otherwise never be called.

`self.shell` is the plugin's ShellContext (shell/context.py), the whole of what
a plugin may use of the job shell.  Built-ins (plugins/) use exactly this API;
`-o plugins=PATH[,PATH]` loads a user's file and instantiates every ShellPlugin
subclass defined in it.  A plugin may also answer requests sent to the job's
shell service with methods marked `@handler("name", schema=...)` (the one
dispatcher's, as services use): handler(msg, req) gets the payload checked
against the schema, and returns the response payload, or NO_REPLY to answer
later itself (`ShellContext.respond`).
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import os
from collections.abc import Callable

from ..errors import PluginError
from ..protocol.dispatch import NO_REPLY, handler

__all__ = ["ShellPlugin", "PluginStack", "PluginError", "NO_REPLY", "handler", "HOOKS",
           "TOPICS"]


class ShellPlugin:
    """Base class of shell plugins.  The hooks below document each topic; they do
    nothing, and a plugin that does not define one is not called for it."""

    name = "plugin"
    options: dict = {}  # option name -> checker(value) raising ValueError, for user plugins

    def __init__(self, shell):
        self.shell = shell   # the plugin's ShellContext

    def shell_init(self) -> None:
        """Before the init barrier, before any task exists; raising fails the job."""

    def shell_start(self) -> None:
        """Every shell of the job started its tasks."""

    def task_init(self, task) -> None:
        """A local task is about to start: set its env, stdio, cpus, pass_fds..."""

    def task_exec(self, task) -> None:
        """Just before the task's command runs (its argv may still change)."""

    def task_exit(self, task) -> None:
        """A local task exited (its status, exitcode, signaled are set)."""

    def shell_signal(self, signum: int) -> None:
        """The shell received `signum` and passed it on to its tasks."""

    def shell_critical_ranks(self, ranks: set, seq: int) -> None:
        """Leader: the job's critical shell ranks are now `ranks` (update `seq`)."""

    def shell_lost(self, shell_rank: int, severity: int, message: str) -> None:
        """Leader: shell `shell_rank` was lost (severity 0: the job is failing)."""

    def shell_tasks_complete(self) -> None:
        """Leader: every task of the job has exited, or its shell was lost."""

    def shell_exit(self) -> None:
        """The shell is about to exit."""


# topic -> the hook that documents it: the one table the stack dispatches through
HOOKS: dict[str, Callable] = {
    "shell.init": ShellPlugin.shell_init,
    "shell.start": ShellPlugin.shell_start,
    "task.init": ShellPlugin.task_init,
    "task.exec": ShellPlugin.task_exec,
    "task.exit": ShellPlugin.task_exit,
    "shell.signal": ShellPlugin.shell_signal,
    "shell.critical-ranks": ShellPlugin.shell_critical_ranks,
    "shell.lost": ShellPlugin.shell_lost,
    "shell.tasks-complete": ShellPlugin.shell_tasks_complete,
    "shell.exit": ShellPlugin.shell_exit,
}
TOPICS = tuple(HOOKS)
_TOPIC_OF = {fn.__name__: topic for topic, fn in HOOKS.items()}
_NAMESPACES = tuple({name.split("_", 1)[0] + "_" for name in _TOPIC_OF})
_ARITY = {topic: len(inspect.signature(fn).parameters) - 1 for topic, fn in HOOKS.items()}


def _plugin_name(cls: type) -> str:
    return getattr(cls, "name", None) or cls.__name__


def _takes(cls: type, attr: str, nargs: int) -> bool:
    """Whether the method `attr` of `cls`, called on an instance, can take `nargs`
    positional arguments.  A plain function's code says it at once; anything else is
    asked through inspect, and one with no signature to read is let through."""
    fn = getattr(cls, attr)
    static = isinstance(inspect.getattr_static(cls, attr), staticmethod)
    if not inspect.isfunction(fn) or static:
        try:   # a bound (class) method or a static one takes no instance
            inspect.signature(fn).bind(*(() if static or inspect.ismethod(fn) else (None,)),
                                       *range(nargs))
        except TypeError:
            return False
        except ValueError:
            pass
        return True
    code = fn.__code__
    positional = code.co_argcount - 1                     # without self
    required = positional - len(fn.__defaults__ or ())
    kw_required = code.co_kwonlyargcount - len(fn.__kwdefaults__ or {})
    varargs = bool(code.co_flags & inspect.CO_VARARGS)
    return kw_required == 0 and required <= nargs and (varargs or nargs <= positional)


@functools.cache
def hooks_of(cls: type) -> tuple[tuple[str, str], ...]:
    """(topic, attribute) of each hook `cls` defines.  Raises PluginError for a method
    in a topic's namespace that names no topic, or a hook that cannot take its
    topic's arguments.  Looked up once per class (shell.main.preload fills it for
    the built-ins before shells are forked)."""
    names = {name for klass in cls.__mro__ if klass is not ShellPlugin
             for name in vars(klass) if name.startswith(_NAMESPACES)}
    found = []
    for attr in sorted(names):
        fn = getattr(cls, attr)
        if not callable(fn):
            continue
        topic = _TOPIC_OF.get(attr)
        if topic is None:
            raise PluginError(f"plugin '{_plugin_name(cls)}': {attr} names no shell plugin "
                              f"topic (hooks: {', '.join(_TOPIC_OF)})")
        if fn is HOOKS[topic]:
            continue  # the base's, which does nothing
        if not _takes(cls, attr, _ARITY[topic]):
            wanted = ", ".join(inspect.signature(HOOKS[topic]).parameters)
            raise PluginError(f"plugin '{_plugin_name(cls)}': {attr} cannot take the "
                              f"arguments of {topic}: {attr}({wanted})")
        found.append((topic, attr))
    return tuple(found)


class PluginStack:
    """The loaded plugins and, for each topic, the callbacks to call in order."""

    def __init__(self, log_error: Callable[[str], None], spawn: Callable):
        self.log_error = log_error
        self.spawn = spawn
        self.plugins: list[ShellPlugin] = []
        self._table: dict[str, list[tuple[str, Callable]]] = {t: [] for t in HOOKS}

    def add(self, plugin: ShellPlugin) -> None:
        for topic, attr in hooks_of(type(plugin)):
            self._table[topic].append((plugin.name, getattr(plugin, attr)))
        self.plugins.append(plugin)

    def subscribe(self, topic: str, callback: Callable, owner: str) -> None:
        """Call `callback` on `topic` too, after those already there."""
        if topic not in self._table:
            raise PluginError(f"plugin '{owner}': cannot subscribe to {topic!r}: no such "
                              f"topic (topics: {', '.join(TOPICS)})")
        self._table[topic].append((owner, callback))

    def find(self, name: str) -> ShellPlugin | None:
        return next((p for p in self.plugins if p.name == name), None)

    def load_file(self, path: str, make: Callable[[type], ShellPlugin]) -> list[ShellPlugin]:
        """Import a user plugin file and add an instance (`make(cls)`) of each ShellPlugin
        subclass it defines; every class is checked before any is made."""
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
        for cls in found:
            try:
                hooks_of(cls)
            except PluginError as exc:
                raise PluginError(f"{path}: {exc}") from None
        out = []
        for cls in found:
            p = make(cls)
            self.add(p)
            out.append(p)
        return out

    def load_user(self, options, make: Callable[[type], ShellPlugin],
                  warn: Callable[[str], None]) -> None:
        """Load the files `-o plugins=PATH[,PATH]` names, then check the options no
        built-in knows with the checker of the plugin that claims each (PluginError
        for a bad value); `warn` is told of each option no plugin claims."""
        paths = options.get("plugins")
        if not paths:
            return
        if isinstance(paths, str):
            paths = [p for p in paths.split(",") if p]
        claimed: dict = {}
        for path in paths:
            for p in self.load_file(path, make):
                claimed.update(getattr(p, "options", {}) or {})
        from ..job import shell_options
        for name, value in options.items():
            if shell_options.lookup(name) is not None:
                continue
            if name not in claimed:  # a plugin may read it all the same (Flux's are open)
                warn(shell_options.warning(name, []))
                continue
            try:
                claimed[name](value)
            except (ValueError, TypeError) as exc:
                raise PluginError(f"invalid shell option {name}={value!r}: {exc}") from None

    async def call(self, topic: str, *args, strict: bool = False) -> None:
        """Run every callback for `topic`, in order.  With strict, the first failure raises."""
        for name, fn in list(self._table[topic]):
            try:
                rv = fn(*args)
                if inspect.isawaitable(rv):
                    await rv
            except Exception as exc:
                if strict:
                    raise PluginError(f"plugin '{name}': {topic} failed: {exc}") from exc
                self.log_error(f"plugin '{name}': {topic} failed: {type(exc).__name__}: {exc}")

    def call_now(self, topic: str, *args) -> None:
        """Run every callback for `topic` at once (a coroutine's rest runs as a task)."""
        for name, fn in list(self._table[topic]):
            try:
                rv = fn(*args)
                if inspect.isawaitable(rv):
                    self.spawn(rv)
            except Exception as exc:
                self.log_error(f"plugin '{name}': {topic} failed: {type(exc).__name__}: {exc}")
