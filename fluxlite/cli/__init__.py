"""The `fluxlite` command: one click group, subcommands loaded on first use.

Every error a command raises ends here and becomes one line on stderr,
"fluxlite CMD: what was wrong", with a nonzero exit: errors found while
parsing options exit 2, everything else 1 (or the code the command chose).
"""

from __future__ import annotations

import sys

import click

from ..errors import FluxliteError
from .prefixes import PrefixGroup

# name -> (module, attribute, one-line help); modules are imported only when used
COMMANDS: dict[str, tuple[str, str, str]] = {
    "start": ("start", "start", "Start an instance of N brokers and run a command in it"),
    "run": ("submit", "run", "Run a job and wait for it, with its output"),
    "submit": ("submit", "submit", "Submit a job and print its id"),
    "bulksubmit": ("bulksubmit", "bulksubmit", "Submit one job per input of a command template"),
    "jobs": ("jobs", "jobs", "List jobs"),
    "resource": ("resource", "resource", "Show and change resources: list, status, info, R, "
                 "eventlog, drain, undrain, reload, acquire-mute"),
    "cancel": ("jobcontrol", "cancel", "Cancel jobs"),
    "job": ("job", "job", "Job utilities: eventlog, wait-event, attach, wait, status, "
            "last, info, raise, raiseall, urgency, kill, killall, purge, id, submit, "
            "taskmap, timeleft, hostpids, memo, namespace"),
    "queue": ("queue", "queue", "Control the job queue: stop, start, enable, disable, status, "
              "list, drain, idle"),
    "kvs": ("kvs", "kvs", "Read and write the key-value store"),
    "dump": ("dump", "dump", "Write the instance's KVS to a tar archive"),
    "restore": ("dump", "restore", "Load a KVS archive into an instance or a new state "
                "directory"),
    "batch": ("batch", "batch", "Submit a batch script that runs in its own instance"),
    "alloc": ("batch", "alloc", "Run an instance as a job, with your terminal attached"),
    "uri": ("proxy", "uri", "Print the URI of an instance (a job's, or its local:// form)"),
    "proxy": ("proxy", "proxy", "Run a command inside an instance (a job's, or at a URI)"),
    "broker": ("start", "broker", "Run one broker of an instance (fixed hosts: --config-path)"),
    "overlay": ("overlay", "overlay", "Show the tree of brokers"),
    "ping": ("misc", "ping", "Send a ping to a rank or a service"),
    "getattr": ("misc", "getattr", "Print a broker attribute"),
    "setattr": ("misc", "setattr", "Set a broker attribute"),
    "lsattr": ("misc", "lsattr", "List broker attributes"),
    "dmesg": ("misc", "dmesg", "Print a broker's recent log"),
    "uptime": ("misc", "uptime", "Show how long the instance has run, its depth and size"),
    "shutdown": ("misc", "shutdown", "Shut the instance down"),
    "keygen": ("keygen", "keygen", "Write a CURVE certificate for a TCP overlay"),
    "compat": ("compat", "compat", "Flux compatibility: `eval \"$(fluxlite compat env)\"`"),
    # commands of flux(1) beyond the job-user core (one module each, or tools.py)
    "exec": ("execcmd", "exec_", "Run a command on broker ranks, outside any job"),
    "top": ("top", "top", "A live view of the instance's resources, jobs and instances"),
    "pstree": ("pstree", "pstree", "Draw jobs and nested instances as a tree"),
    "version": ("tools", "version", "Print the versions of fluxlite and its libraries"),
    "config": ("config", "config", "Show and change the instance configuration: get, set, "
               "unset, load, reload, builtin"),
    "jobtap": ("jobtap", "jobtap", "Manage the job-manager's plugins: list, load, remove, "
               "query"),
    "module": ("module", "module", "Manage each broker's modules: list, remove, load, "
               "reload, stats, debug, trace"),
    "hostlist": ("tools", "hostlist", "Expand, combine and transform lists of hosts"),
    "env": ("tools", "env", "Print the environment fluxlite gives commands, or run one in it"),
    "logger": ("tools", "logger", "Write a message to the broker's log"),
    "event": ("tools", "event", "Publish and watch events: pub, sub"),
    "pgrep": ("tools", "pgrep", "List the jobs whose name matches a pattern"),
    "pkill": ("tools", "pkill", "Cancel the jobs whose name matches a pattern"),
}
HIDDEN: set[str] = set()


class LazyGroup(PrefixGroup):
    def list_commands(self, ctx):
        return [n for n in COMMANDS if n not in HIDDEN]

    def get_command(self, ctx, name):
        entry = COMMANDS.get(name)
        if entry is None:
            return None
        import importlib
        module = importlib.import_module(f"{__name__}.{entry[0]}")
        return getattr(module, entry[1])

    def format_commands(self, ctx, formatter):
        rows = [(n, COMMANDS[n][2]) for n in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


# what -v/--verbose shows: the environment that tells a command where to work
STEERING = ("FLUXLITE_URI", "FLUX_URI", "FLUXLITE_KVS_NAMESPACE", "FLUX_KVS_NAMESPACE")


def _version(ctx, param, value):
    """-V/--version: `fluxlite version`'s lines, as flux -V runs flux-version."""
    if value and not ctx.resilient_parsing:
        from .tools import version
        ctx.invoke(version)
        ctx.exit()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-p", "--parent", count=True,
              help="Run the command in the enclosing instance (where this one runs as "
                   "a job); give it again to go up further.")
@click.option("-r", "--root", is_flag=True,
              help="Run the command in the top-level instance (overrides --parent).")
@click.option("-v", "--verbose", is_flag=True,
              help="Print the instance and KVS namespace the command is given "
                   "(NAME=VALUE lines) first.")
@click.option("-V", "--version", is_flag=True, is_eager=True, expose_value=False,
              callback=_version, help="Print the versions (`fluxlite version`) and exit.")
def cli(parent, root, verbose):
    """fluxlite: a resource manager with Flux semantics, on your laptop.

    Start an instance with `fluxlite start`, then run jobs in it.  Inside an
    instance FLUXLITE_URI says where it is.
    """
    if parent or root:
        from .proxy import enter_enclosing
        enter_enclosing(None if root else parent)
    if verbose:
        import os
        for name in STEERING:
            if os.environ.get(name):
                click.echo(f"{name}={os.environ[name]}")


GROUPS = {"job", "kvs", "resource", "overlay", "compat", "queue", "config", "jobtap",
          "module", "event"}  # commands with subcommands


def _command_name(argv: list[str]) -> str:
    """'run', or 'job eventlog' for a group's subcommand (for error messages)."""
    words = [a for a in argv if not a.startswith("-")][:2]
    if words and words[0] in GROUPS and len(words) > 1:
        return " ".join(words)
    return words[0] if words else ""


def main(argv: list[str] | None = None) -> None:
    sys.exit(_quick_exit(run(argv)))


def run(argv: list[str] | None = None) -> int:
    """Run one command; returns its exit code (errors are printed as one line)."""
    argv = sys.argv[1:] if argv is None else argv
    name = _command_name(argv)
    prog = f"fluxlite {name}" if name.split(" ")[0] in COMMANDS else "fluxlite"
    try:
        rv = cli.main(args=argv, prog_name="fluxlite", standalone_mode=False)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except click.exceptions.NoArgsIsHelpError as exc:
        # a bare group: its help, as click prints it (not folded into one line)
        print(exc.ctx.get_help() if exc.ctx else exc.format_message(), file=sys.stderr)
        return 2
    except click.UsageError as exc:
        # the command that refused the words: a group for an unknown subcommand
        # (`fluxlite job bogus` points to 'fluxlite job --help')
        where = exc.ctx.command_path if exc.ctx is not None else prog
        msg = exc.format_message().replace("\n", " ")
        return _die(where, f"{msg} (see '{where} --help')", 2)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.Abort:
        return 130
    except FluxliteError as exc:
        return _die(prog, exc.message, exc.exit_code)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 1
    except RecursionError:
        # Python's JSON and TOML parsers (and what walks their result) recurse: input
        # nested hundreds deep (kvs put -j, --conf TEXT, a config) is refused
        return _die(prog, "input nested too deeply (tables, arrays or objects within "
                          "each other, hundreds of levels deep)", 1)
    return rv if isinstance(rv, int) else 0


def _die(prog: str, message: str, code: int) -> int:
    # one write, newline included: stderr is unbuffered, and the lines of tasks
    # failing at once (stderr goes out as it comes) must not splice together
    sys.stderr.write(f"{prog}: {message}\n")
    return code


def _quick_exit(code: int) -> int:
    """Flush and leave without interpreter teardown (it costs every command ~10 ms).

    The ZeroMQ context is terminated first, so a closing handle's last message
    (its disconnect) still reaches the broker."""
    import os
    sync = sys.modules.get("fluxlite.client.sync")  # loaded only if a handle was opened
    if sync is not None:
        try:
            sync.term_context()
        except Exception:
            pass
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        pass
    try:
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):
        pass
    os._exit(code)
