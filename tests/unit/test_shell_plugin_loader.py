"""The shell's plugin loader and dispatch (fluxlite/shell/plugin.py): hooks found
through the one HOOKS table, misnamed or mis-shaped hooks refused at load with
one line, topics dispatched in order; and the built-in plugins' use of the shell,
which goes through ShellContext only (fluxlite/shell/context.py)."""

from __future__ import annotations

import ast
import asyncio
import pathlib
import textwrap

import pytest

import fluxlite.shell.plugins as builtins_pkg
from fluxlite.errors import PluginError
from fluxlite.shell import plugin as plugin_mod
from fluxlite.shell.context import ShellContext
from fluxlite.shell.plugin import HOOKS, TOPICS, PluginStack, ShellPlugin, hooks_of

pytestmark = pytest.mark.timeout(30)

HOOK_NAMES = ", ".join(fn.__name__ for fn in HOOKS.values())


def test_hooks_table_has_one_documented_hook_per_topic():
    assert TOPICS == tuple(HOOKS)
    for topic, fn in HOOKS.items():
        assert fn.__name__ == topic.replace(".", "_").replace("-", "_")
        assert fn.__doc__, topic
        assert topic in plugin_mod.__doc__, f"{topic} is not in plugin.py's table"


def test_a_misspelled_hook_is_refused_in_one_line_listing_the_hooks():
    class Typo(ShellPlugin):
        name = "typo"

        def task_exited(self, task):   # task.exit's hook is task_exit
            pass

    with pytest.raises(PluginError) as err:
        hooks_of(Typo)
    text = str(err.value)
    assert text == f"plugin 'typo': task_exited names no shell plugin topic (hooks: " \
                   f"{HOOK_NAMES})"
    assert "\n" not in text and "task_exit," in text


def test_a_hook_that_cannot_take_its_topics_arguments_is_refused():
    class Short(ShellPlugin):
        name = "short"

        def task_exit(self):
            pass

    with pytest.raises(PluginError, match=r"plugin 'short': task_exit cannot take the "
                                          r"arguments of task.exit: task_exit\(self, task\)$"):
        hooks_of(Short)


@pytest.mark.parametrize("hook, ok", [
    ("def task_exit(self, task, extra): pass", False),
    ("def task_exit(self, task, extra=1): pass", True),
    ("def task_exit(self, *args): pass", True),
    ("def task_exit(self, task, *, must): pass", False),
    ("def task_exit(self, task, *, may=1): pass", True),
    ("task_exit = staticmethod(lambda task: None)", True),
    ("task_exit = staticmethod(lambda: None)", False),
    ("task_exit = classmethod(lambda cls, task: None)", True),
    ("task_exit = classmethod(lambda cls: None)", False),
])
def test_a_hooks_arguments_are_checked_whatever_its_form(hook, ok):
    ns: dict = {}
    exec(f"class P(ShellPlugin):\n    name = 'p'\n    {hook}\n", {"ShellPlugin": ShellPlugin}, ns)
    if ok:
        assert hooks_of(ns["P"]) == (("task.exit", "task_exit"),)
    else:
        with pytest.raises(PluginError, match="task_exit cannot take the arguments"):
            hooks_of(ns["P"])


def test_hooks_are_found_and_what_is_not_a_hook_is_left_alone():
    class Fine(ShellPlugin):
        name = "fine"
        shell_note = "not a method"    # data in the namespace is not a hook

        def shell_init(self):
            pass

        async def task_exit(self, task):
            pass

        def shell_lost(self, *args):   # takes what it is given
            pass

        def _task_helper(self):        # private names are the plugin's own
            pass

        def tasks_left(self):          # outside the namespaces (task_, shell_)
            pass

    assert set(hooks_of(Fine)) == {("shell.init", "shell_init"), ("task.exit", "task_exit"),
                                   ("shell.lost", "shell_lost")}


def test_every_builtin_plugin_loads():
    import importlib
    for path in pathlib.Path(builtins_pkg.__file__).parent.glob("[a-z]*.py"):
        importlib.import_module(f"{builtins_pkg.__name__}.{path.stem}")
    classes = [c for c in ShellPlugin.__subclasses__()
               if c.__module__.startswith("fluxlite.shell.plugins.")]
    assert {c.name for c in classes} >= {"output", "signal", "doom", "affinity", "pmi",
                                         "pty", "input", "instance", "limits"}
    for cls in classes:
        assert hooks_of(cls), cls.name


async def test_topics_are_called_in_load_order_and_subscribers_after():
    calls, logged = [], []
    stack = PluginStack(logged.append, asyncio.ensure_future)

    class A(ShellPlugin):
        name = "a"

        def shell_start(self):
            calls.append("a")

    class B(ShellPlugin):
        name = "b"

        async def shell_start(self):
            await asyncio.sleep(0)
            calls.append("b")

        def shell_exit(self):
            raise RuntimeError("boom")

    stack.add(A(None))
    stack.add(B(None))
    stack.subscribe("shell.start", lambda: calls.append("subscriber"), "c")
    await stack.call("shell.start")
    assert calls == ["a", "b", "subscriber"]
    await stack.call("shell.exit")       # a failure is logged, the others still run
    assert logged == ["plugin 'b': shell.exit failed: RuntimeError: boom"]
    with pytest.raises(PluginError, match="plugin 'b': shell.exit failed: boom"):
        await stack.call("shell.exit", strict=True)
    assert stack.find("b").name == "b" and stack.find("nope") is None


async def test_call_now_runs_at_once():
    seen = []
    stack = PluginStack(seen.append, asyncio.ensure_future)
    stack.subscribe("shell.signal", seen.append, "x")
    stack.call_now("shell.signal", 15)
    assert seen == [15]


def test_subscribing_to_a_topic_that_does_not_exist_is_refused():
    stack = PluginStack(print, asyncio.ensure_future)
    with pytest.raises(PluginError, match=r"plugin 'x': cannot subscribe to 'task.exited': "
                                          r"no such topic \(topics: shell.init, "):
        stack.subscribe("task.exited", print, "x")


def test_a_user_file_with_a_misspelled_hook_is_refused_before_any_instance(tmp_path):
    path = tmp_path / "typo.py"
    path.write_text(textwrap.dedent("""
        from fluxlite.shell.plugin import ShellPlugin
        class Good(ShellPlugin):
            name = "good"
            def task_exit(self, task): pass
        class Typo(ShellPlugin):
            name = "typo"
            def shell_tasks_completed(self): pass
    """))
    made = []
    stack = PluginStack(print, asyncio.ensure_future)
    with pytest.raises(PluginError, match=rf"^{path}: plugin 'typo': shell_tasks_completed "
                                          r"names no shell plugin topic \(hooks: "):
        stack.load_file(str(path), lambda cls: made.append(cls) or cls(None))
    assert made == [] and stack.plugins == []


# ------------------------------------------------- built-ins use ShellContext only
def _context_names() -> set[str]:
    return {n for n in dir(ShellContext) if not n.startswith("_")}


def _uses_of_the_shell(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, attribute) of every `self.shell.X`, and of `s.X` where a function bound
    `s = self.shell` (or received the context as a parameter named `shell`)."""
    def is_self_shell(node) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "shell" and \
            isinstance(node.value, ast.Name) and node.value.id == "self"

    uses = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        aliases = {a.arg for a in fn.args.args if a.arg == "shell"}
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and is_self_shell(node.value):
                aliases |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(fn):
            if isinstance(node, ast.Attribute) and (
                    is_self_shell(node.value) or
                    isinstance(node.value, ast.Name) and node.value.id in aliases):
                uses.append((node.lineno, node.attr))
    return uses


def test_builtin_plugins_use_only_the_shell_context():
    allowed = _context_names()
    bad, seen = [], set()
    for path in sorted(pathlib.Path(builtins_pkg.__file__).parent.glob("*.py")):
        for line, attr in _uses_of_the_shell(ast.parse(path.read_text())):
            seen.add(attr)
            if attr not in allowed:
                bad.append(f"{path.name}:{line}: shell.{attr}")
    assert not bad, "built-in plugins reach past ShellContext:\n" + "\n".join(bad)
    assert {"options", "log", "raise_exception", "call_leader", "subscribe"} <= seen


def test_the_context_offers_no_way_into_the_shell():
    class Core:   # what a JobShell holds, that plugins must not reach
        options = {"a": 1}
        h = plugins = dispatcher = output_sinks = early_signals = "internal"

    ctx = ShellContext(Core())
    for name in ("h", "plugins", "dispatcher", "output_sinks", "early_signals"):
        assert not hasattr(ctx, name)
    with pytest.raises(AttributeError):
        ctx.anything = 1                   # nothing can be hung on it either
    with pytest.raises(TypeError):
        ctx.options["a"] = 2               # the job's options are read-only
