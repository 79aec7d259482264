"""Job shell options (`-o NAME[=VALUE]`): the one table, checked at submit.

Each option names the plugin that reads it and how its value is checked.  An
unknown option is an error, unless the job loads user plugins (`-o plugins=`):
then the shell, once it has loaded them, requires each such option to be
claimed by a plugin (ShellPlugin.options) and runs that plugin's checker.
"""

from __future__ import annotations

import json

from ..errors import UsageError
from ..util import fsd, mustache


def _exit_timeout(v) -> None:
    if isinstance(v, bool):
        raise ValueError
    if isinstance(v, str) and v.strip().lower() == "none":
        return
    fsd.parse(v)


def flag(v) -> bool:
    """The value of a flag option: -o NAME (1), true/false, 1/0, in any case."""
    if isinstance(v, (bool, int)):
        return bool(v)
    s = str(v).lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise ValueError(f"{v!r} is not true or false")


def _flag(v) -> None:
    flag(v)


def _plugins(v) -> None:
    if isinstance(v, str):
        return
    if isinstance(v, list) and all(isinstance(p, str) for p in v):
        return
    raise ValueError


def _any(v) -> None:
    return None


def _output_path(flag: str):
    def check(v) -> None:
        if not isinstance(v, str):
            raise ValueError
        try:
            mustache.check(v, flag)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return check


OUTPUT_MODES = ("truncate", "append")


def _output_mode(v) -> None:
    if v not in OUTPUT_MODES:
        raise ValueError


PMI_MODES = ("simple", "off")


def _pmi(v) -> None:
    if v not in PMI_MODES:
        raise ValueError


OPTIONS = {
    "exit-timeout": (_exit_timeout, "doom",
                     "after the first task exits, how long others may run: FSD or none"),
    "exit-on-error": (_flag, "doom", "fail the job as soon as any task fails"),
    "plugins": (_plugins, "shell", "path(s) of user plugins to load (comma separated)"),
    "instance": (_any, "instance", "tasks are brokers of a nested instance (set by batch/alloc)"),
    "pty": (_any, "pty", "run task 0 on a pseudo-terminal (set by alloc)"),
    "output": (_any, "output", "output.stdout.path / output.stderr.path: write to files; "
                               "output.label: prefix lines with the task rank"),
    "output.stdout.path": (_output_path("--output"), "output",
                           "write stdout to this file (mustache tags expand)"),
    "output.stderr.path": (_output_path("--error"), "output",
                           "write stderr to this file (mustache tags expand)"),
    "output.mode": (_output_mode, "output", "truncate (default) or append: how output "
                                            "files are opened"),
    "pmi": (_pmi, "pmi", "simple (default): serve PMI-1 to MPI tasks; off: no PMI"),
    "input": (_any, "input", "tasks read stdin from the job's input log (set by run), or "
                             "input.path=FILE"),
}

_MESSAGES = {
    "exit-timeout": "exit-timeout is not a valid Flux Standard Duration (e.g. 30s, 1.5m, none)",
    "exit-on-error": "exit-on-error takes no value, or true/false",
    "plugins": "plugins must be a path or a list of paths",
    "output.stdout.path": "output.stdout.path must be a file name",
    "output.stderr.path": "output.stderr.path must be a file name",
    "output.mode": "output.mode must be truncate or append",
    "pmi": "pmi must be simple or off",
}


def parse_setopt(text: str) -> tuple[str, object]:
    """'-o NAME[=VALUE]': VALUE is JSON when it parses as JSON, else a string; bare NAME is 1."""
    name, sep, value = text.partition("=")
    if not name:
        raise UsageError(f"invalid shell option {text!r}: expected NAME[=VALUE]")
    if not sep:
        return name, 1
    try:
        return name, json.loads(value)
    except ValueError:
        return name, value


def lookup(name: str):
    """The table entry for an option name (other output.*, pty.*, input.* share one entry)."""
    if name in OPTIONS:
        return OPTIONS[name]
    return OPTIONS.get(name.split(".", 1)[0]
                       if name.startswith(("pty.", "output.", "input.")) else None)


def validate(options: dict) -> None:
    """Raise UsageError for an unknown or malformed shell option."""
    if not isinstance(options, dict):
        raise UsageError("shell options must be a map")
    user_plugins = "plugins" in options
    for name, value in options.items():
        spec = lookup(name)
        if spec is None:
            if user_plugins:
                continue  # a user plugin may claim it; the shell checks at load time
            known = ", ".join(sorted(n for n in OPTIONS if n not in ("instance", "pty")))
            raise UsageError(f"unknown shell option {name!r} (known: {known}; "
                             "user plugins loaded with -o plugins=PATH may add more)")
        try:
            spec[0](value)
        except (ValueError, TypeError):
            raise UsageError(f"invalid shell option {name}={value!r}: "
                             f"{_MESSAGES.get(name, 'malformed value')}") from None
