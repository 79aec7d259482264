"""Flux's flux-start options around the instance itself (doc/man1/flux-start.rst):
the config (--conf's forms, --sysconfig), recovery mode (-r/--recovery), and the test-mode
knobs (--wrap, -X, --test-start-mode, --test-exit-mode/--test-exit-timeout,
--test-pmi-clique, --test-rundir-cleanup) read into the launcher's StartMode
fields.  Kept apart from start.py so that the common `fluxlite start` reads none of
it but the option table."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import click

from ..errors import UsageError

SYSCONFIG = "/etc/flux/system/conf.d"     # Flux's system instance config directory
SYSTEM_STATEDIR = "/var/lib/flux"         # and its state directory
STATE_DB = "content.sqlite"               # the state database in a state directory


def config_path(given: str | None, system: bool, why: str = "--sysconfig") -> str | None:
    """-c PATH, else (--sysconfig, or --recovery with no TARGET) the system config,
    which must be there: fluxlite has no system instance of its own to supply one."""
    if not system:
        return given
    if given:
        click.echo(f"fluxlite start: warning: overriding the --recovery/--sysconfig "
                   f"config path with {given}", err=True)
        return given
    if not os.path.isdir(SYSCONFIG):
        raise UsageError(f"{why}: {SYSCONFIG}: no such directory (this machine has "
                         "no Flux system instance config; name one with -c PATH)")
    return SYSCONFIG


def conf_sources(values) -> list:
    """The instance's config sources from --config-path and --conf VALUE..., in
    order: a file or directory that exists (or a named config's file) as its
    absolute path, read as -c reads one; any other VALUE in Flux's forms (KEY=VALUE,
    JSON or TOML text) as the config object it gives.  The brokers merge them in
    this order at start, and `config reload` reads the paths again and merges the
    same objects (entry.build_attrs, config.sources)."""
    from .optvalues import conf_value, named_config
    out: list = []
    for v in values:
        if "\n" not in v and os.path.exists(v):
            out.append(os.path.abspath(v))
        elif v.startswith("{") or "\n" in v or "=" in v or v.endswith((".toml", ".json")):
            out.append(conf_value(v))
        else:
            out.append(named_config(v))
    return out


def start_mode(wrap, noexec: bool, verbose: int, start: str, exit_mode: str | None,
               exit_timeout: str | None, remove_rundir: bool, pmi_clique: str | None) -> dict:
    """The launcher's StartMode fields from start's options."""
    mode: dict = {"noexec": noexec, "verbose": verbose, "start_mode": start,
                  "remove_rundir": remove_rundir, "pmi_clique": pmi_clique or "single"}
    args = tuple(a for value in wrap for a in value.split(",") if a)
    if wrap and not args:
        raise UsageError("--wrap: no arguments (give a command and its arguments, "
                         "comma-separated: --wrap=valgrind,--tool=memcheck)")
    mode["wrap"] = args
    if exit_mode is not None:
        mode["exit_mode"] = exit_mode
    if exit_timeout is not None:
        from ..util import fsd
        try:
            mode["exit_timeout"] = fsd.parse_timeout(exit_timeout)
        except ValueError as exc:
            raise UsageError(f"--test-exit-timeout={exit_timeout}: {exc}") from None
    return mode


def exec_broker(mode: dict, attrs: dict[str, str], defaults: dict[str, str],
                conf: list[str], command: list[str], env: dict[str, str]) -> int | None:
    """Under a PMI launcher (Flux's normal mode), with --wrap, -X or -v: the command
    line that runs this broker (`fluxlite start` with `conf`, the --conf options of
    the config sources, and the attributes that differ
    from the defaults as -S options, under --wrap's arguments) is printed with -v;
    then, with -X, 0 is returned (nothing runs), with --wrap this process becomes
    it, and else None (this process goes on to be the broker)."""
    import shlex
    import shutil
    import sys
    argv = [*mode["wrap"], sys.executable, "-m", "fluxlite", "start", *conf,
            *(f"-S{n}={v}" for n, v in attrs.items()
              if defaults.get(n) != v and n not in ("config.path", "config.sources")),
            "--", *command]
    if mode["verbose"]:
        click.echo(f"fluxlite start: {shlex.join(argv)}", err=True)
    if mode["noexec"]:
        return 0
    if not mode["wrap"]:
        return None
    if shutil.which(argv[0]) is None:
        raise UsageError(f"--wrap: {argv[0]}: command not found")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvpe(argv[0], argv, env)
    return 127      # not reached: execvpe returns only by raising


@dataclass
class Recovery:
    """-r/--recovery[=TARGET]: rank 0 alone (no other broker joins) on a state
    directory, or on a copy of a dump archive restored into a fresh one."""
    target: str
    system: bool            # no TARGET: the system instance's state directory
    archive: bool           # TARGET is a dump archive (fluxlite dump / flux dump)

    @classmethod
    def check(cls, target: str) -> Recovery:
        system = not target
        path = SYSTEM_STATEDIR if system else target
        try:
            st = os.stat(path)
        except OSError as exc:
            raise UsageError(f"--recovery: {path}: {exc.strerror}") from None
        if not os.path.isdir(path):
            return cls(path, system, archive=True)
        if st.st_uid != os.getuid():
            raise UsageError(f"--recovery: {path}: not owned by you")
        if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
            raise UsageError(f"--recovery: {path}: no access")
        db = os.path.join(path, STATE_DB)
        if not os.path.exists(db):
            raise UsageError(f"--recovery: {db}: No such file or directory (not a "
                             "state directory an instance kept)")
        if not os.access(db, os.R_OK | os.W_OK):
            raise UsageError(f"--recovery: {db}: no read and write permission")
        return cls(path, system, archive=False)

    @contextlib.contextmanager
    def statedir(self, noexec: bool):
        """The state directory to start on: TARGET, or a private one the archive is
        restored into (removed at the end: nothing done in recovery is kept)."""
        import shutil
        import subprocess
        import sys
        import tempfile
        if not self.archive:
            yield os.path.abspath(self.target)
            return
        tmp = tempfile.mkdtemp(prefix="fluxlite-recovery-")
        try:
            if not noexec:
                argv = [sys.executable, "-m", "fluxlite", "restore", "-q",
                        f"--statedir={tmp}", os.path.abspath(self.target)]
                done = subprocess.run(argv, stdin=subprocess.DEVNULL)
                if done.returncode:
                    raise SystemExit(done.returncode)
            yield tmp
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def enter(self, attrs: dict[str, str], statedir: str, config: str | None, mode: dict,
              noexec: bool) -> None:
        """Recovery's attributes and start mode, and the notice that says so."""
        attrs.update({"statedir": statedir, "broker.recovery-mode": "1",
                      "broker.quorum": "1", "log-stderr-level": "4"})
        mode["start_mode"] = "leader"
        if noexec:
            return
        kept = (f"{statedir} (changes are kept)" if not self.archive else
                f"restored from {self.target} (changes are not kept)")
        lines = ["fluxlite recovery mode",
                 "rank 0 runs alone: no other broker joins",
                 f"state     {kept}",
                 f"config    {config or '-'}",
                 "the instance ends when the initial program (a shell: Ctrl-D) exits"]
        width = max(map(len, lines)) + 2
        click.echo("+" + "-" * width, err=True)
        for line in lines:
            click.echo(f"| {line}", err=True)
        click.echo("+" + "-" * width, err=True)
