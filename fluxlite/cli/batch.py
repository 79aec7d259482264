"""`fluxlite batch`, `fluxlite alloc`, `fluxlite uri`, `fluxlite proxy`: instances as jobs.

A batch or alloc job runs one `fluxlite broker` per node it gets; the brokers
find each other through PMI (their job shells serve it) and form a whole
instance.  Its rank 0 runs the batch script (stored in the jobspec), the
alloc command, or nothing (`alloc --bg`) until it is shut down.

Defaults for instance jobs: `exit-timeout=none` (set `-o exit-timeout=` to
change it), and persistence: losing a leaf rank is survivable, because only
rank 0 and the interior ranks of the child's tree are declared critical.
`--no-persist` makes every rank critical, so any lost node ends the job at
once with a `node-failure` exception.  The site default is the instance
config's `batch.persist`.
"""

from __future__ import annotations

import os
import re
import shlex
import sys

import click

from ..errors import FluxliteError, UsageError
from .common import NO_INTERSPERSED, handle
from .options import COMMON, SLOTS, SUBMITTING, apply, jobspec_from, output_options

INSTANCE = [
    click.Option(["--broker-opts", "broker_opts"], multiple=True, metavar="OPT",
                 help="Option for every broker of the new instance, e.g. "
                      "--broker-opts=-Stbon.topo=kary:2 (repeatable)."),
    click.Option(["--conf"], multiple=True, metavar="FILE|KEY=VAL|STRING|NAME",
                 help="Config of the new instance (repeatable, merged in order): "
                      "KEY=VAL (a dotted key, a JSON value), a .toml or .json file, "
                      "TOML or JSON text holding a newline, or a named config "
                      "NAME.toml in $XDG_CONFIG_HOME/flux/config."),
    click.Option(["--input"], default=None, metavar="FILE",
                 help="The instance's initial program reads FILE as standard input."),
    click.Option(["-u", "--unbuffered"], is_flag=True,
                 help="Pass output on as it comes, not a line at a time."),
    click.Option(["-l", "--label-io"], is_flag=True,
                 help="Prefix output lines with the task rank."),
    click.Option(["--quiet"], is_flag=True, help="Do not print the job id."),
    click.Option(["--dump"], is_flag=False, flag_value="flux-{{jobid}}-dump.tgz",
                 default=None, metavar="[FILE]",
                 help="Archive the instance's KVS to FILE as its initial program ends "
                      "(default flux-{{jobid}}-dump.tgz; .tgz: compressed)."),
    click.Option(["--persist/--no-persist", "persist"], default=None,
                 help="--persist (the default): the instance survives the loss of leaf "
                      "ranks; it shrinks, and jobs that no longer fit fail at once (a "
                      "script of full-size jobs sees each one fail rather than hang, and "
                      "runs to its end).  --no-persist: every rank is critical, so losing "
                      "any node ends the job promptly with a node-failure exception; "
                      "choose it when the work is useless without every node.  The site "
                      "default is the instance config's batch.persist; docs/resilience.md "
                      "explains the choice."),
]


def _instance_spec(h, command_tail: list[str], params: dict, *, name: str | None = None,
                   system: dict | None = None, extra_broker_opts=()) -> dict:
    persist = params.get("persist")
    if persist is None:
        try:
            persist = h.getattr("batch.persist") != "0"
        except FluxliteError:
            persist = True
    from .start import instance_broker_opts
    opts = instance_broker_opts(params.get("broker_opts") or ()) + list(extra_broker_opts)
    if params.get("conf"):
        from .optvalues import instance_conf
        opts = instance_conf(params["conf"]) + opts
    if not persist:
        # after the user's options, so --no-persist wins over a critical-ranks setting
        opts.append("-Sbroker.critical-ranks=all")
    from .start import check_broker_opts
    check_broker_opts(opts)
    from ..job.jobspec import broker_command
    if params.get("dump"):
        command_tail = _dumping(command_tail, params["dump"])
    command = [*broker_command(), *opts, "--", *command_tail]
    extra = {"instance": 1}
    if "exit-timeout" not in (params.get("setopt") or {}):
        extra["exit-timeout"] = "none"
    if params.get("nodes") is None and params.get("ntasks") is None:
        params = dict(params, nodes=1)
    p = dict(params, job_name=params.get("job_name") or name)
    return jobspec_from(command, p, per_node=1, extra_options=extra, system=system)


def _dumping(command_tail: list[str], path: str) -> list[str]:
    """--dump: the initial program, then `fluxlite dump PATH` of the instance's KVS as
    it ends (PATH's mustache tags, {{jobid}}, filled by the job shell); the program's
    exit status is kept.  Without a program (alloc --bg) the dump is not made."""
    if not command_tail:
        return command_tail
    from ..job.jobspec import broker_command
    dump = f"{shlex.quote(broker_command()[0])} dump {shlex.quote(path)}"
    return ["/bin/sh", "-c", f'"$@"; rc=$?; {dump}; exit $rc', "sh", *command_tail]


# RFC 36 sentinels: any run of non-word characters (the comment: '#', '//', '--'),
# then the tag and a colon.  Flux's tag and fluxlite's own are both always read.
_SENTINEL = re.compile(r"^([^\w]*)(fluxlite|FLUXLITE|flux|FLUX):(.*)$")


def _directive_words(body: str) -> list[str]:
    """A directive's words split as a shell would, '#' starting a comment (as Flux)."""
    lexer = shlex.shlex(body, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.escapedquotes = "\"'"
    return list(lexer)


def _triple_quoted(value: str, where: str) -> str:
    """A directive with its paired triple-quoted strings made one shell word each
    (RFC 36); a triple quote not at the end of the line and not paired is an error."""
    for q in ('"""', "'''"):
        n = value.count(q)
        if n and n % 2 == 0:
            return re.sub(r"(\"\"\"|''')(.*?)\1", lambda m: shlex.quote(m.group(2)), value)
    if re.search(r"(\"\"\"|''').", value):
        raise UsageError(f"{where}: unclosed triple quote: {value.strip()}")
    return value


def _directive_bodies(script: str, name: str):
    """(line number, text after the sentinel) of each directive, RFC 36's rules: they
    start at the first one and end at the first nonblank line that does not begin
    with the directive's comment prefix (one after that is an orphan, an error), one
    sentinel a script, and a value between triple quotes at line ends may span lines
    (`# flux: --conf=\"\"\"` ... `# flux: \"\"\"`): one word, its common indent
    removed."""
    sentinel = prefix = None
    disabled_after = None
    multi: list[str] | None = None   # the open multi-line value: its lines so far
    quote = indent = ""
    start = 0
    for lineno, line in enumerate(script.splitlines(), start=1):
        if lineno == 1 and line.startswith("#!"):
            continue
        m = _SENTINEL.match(line)
        if m is None:
            if multi is not None:
                raise UsageError(f"{name} line {lineno}: unterminated multi-line quote at "
                                 f"line {start}")
            if (sentinel is not None and disabled_after is None and line.strip()
                    and not line.startswith(prefix.rstrip())):
                disabled_after = lineno - 1
            continue
        if disabled_after is not None:
            raise UsageError(f"{name} line {lineno}: orphan '{m.group(2)}:' directive "
                             f"(directives end at the first command, line "
                             f"{disabled_after + 1})")
        if sentinel is None:
            sentinel, prefix = m.group(1) + m.group(2), m.group(1)
        elif m.group(1) + m.group(2) != sentinel:
            raise UsageError(f"{name} line {lineno}: sentinel changed from '{sentinel}:' to "
                             f"'{m.group(1) + m.group(2)}:' (one sentinel per script)")
        value = _triple_quoted(m.group(3), f"{name} line {lineno}")
        ends = value[-3:] if value.endswith(('"""', "'''")) else ""
        if multi is None and ends:             # a multi-line value opens
            quote, start = ends, lineno
            indent = value[:len(value) - len(value.lstrip())]
            multi = [value[:-3].removeprefix(indent)]
        elif multi is not None and ends == quote:   # ... and closes
            multi.append(value[:-3].removeprefix(indent))
            yield start, multi[0] + shlex.quote("\n".join(multi[1:]))
            multi = None
        elif multi is not None:
            multi.append(value.removeprefix(indent))
        else:
            yield lineno, value
    if multi is not None:
        raise UsageError(f"{name}: unterminated multi-line quote at line {start}")


def read_directives(script: str, name: str = "script") -> list[str]:
    """Options from the directives at the top of a script: Flux's '# flux: -N2' lines
    or fluxlite's own '# fluxlite: -N2' ones (RFC 36, as Flux reads them:
    _directive_bodies).  A directive that is not an option is an error; each is
    checked on its own, so an error names its line."""
    args: list[str] = []
    for lineno, body in _directive_bodies(script, name):
        try:
            words = _directive_words(body)
            if not words:
                continue
            sub = batch.make_context("batch", words + ["--", "script"])
        except (ValueError, click.UsageError) as exc:
            why = exc.format_message() if isinstance(exc, click.UsageError) else str(exc)
            raise UsageError(f"argument parsing failed at {name} line {lineno}: {why}") \
                from None
        if "--" in sub.params.values():  # an option at the end of the line took "--"
            raise UsageError(f"argument parsing failed at {name} line {lineno}: "
                             f"{words[-1]} needs a value")
        if sub.params["args"] != ("script",):
            raise UsageError(f"{name} line {lineno}: unknown directive {body.strip()!r} "
                             "(a directive holds batch options, e.g. '# fluxlite: -N2')")
        if sub.params["wrap"]:
            raise UsageError(f"{name} line {lineno}: --wrap cannot be a directive")
        args += words
    return args


def merge_directives(ctx: click.Context, params: dict, directives: list[str]) -> dict:
    """The command line over the script's directives, as Flux's batch does: an option
    given on the command line wins; repeatable ones (-o, -S, --env, --broker-opts)
    add up, the command line's last."""
    sub = batch.make_context("batch", directives + ["--", "script"], parent=ctx.parent)
    merged = dict(params)
    for key, value in sub.params.items():
        if key not in params or key in ("args", "wrap"):
            continue
        if ctx.get_parameter_source(key).name == "DEFAULT":
            merged[key] = value
        elif isinstance(value, dict):
            merged[key] = {**value, **params[key]}
        elif isinstance(value, tuple):
            merged[key] = value + tuple(params[key])
    return merged


@click.command(context_settings=NO_INTERSPERSED)
@apply(SLOTS + COMMON + INSTANCE + output_options("fluxlite-{{id}}.out") + SUBMITTING)
@click.option("--wrap", is_flag=True, help="Wrap the arguments in a /bin/sh script.")
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="[SCRIPT [ARGS]...]")
@click.pass_context
def batch(ctx, **params):
    """Submit SCRIPT (with ARGS) to run in a new instance of its own; print the job id.

    The script is stored with the job, so editing the file afterwards changes
    nothing.  '# fluxlite: OPTIONS' lines at its top add options (the command
    line wins), as do Flux's '# flux: OPTIONS' ones.  Instance jobs default to
    exit-timeout=none (set -o exit-timeout= to change it) and --persist.
    """
    wrap, args = params.pop("wrap"), params.pop("args")
    if not args and sys.stdin.isatty():
        raise UsageError("give a SCRIPT, --wrap COMMAND, or a script on standard input")
    path = "stdin"
    if wrap:
        # as Flux does: the arguments joined by spaces (or stdin) are the script's body
        body = " ".join(args) + "\n" if args else sys.stdin.read()
        script = "#!/bin/sh\n" + body
        name, script_args = "batch", []
    elif not args:
        script, name, script_args = sys.stdin.read(), "batch", []
    else:
        path, script_args = args[0], list(args[1:])
        try:
            with open(path, encoding="utf-8") as f:
                script = f.read()
        except UnicodeDecodeError:
            raise UsageError(f"{path} does not appear to be a script (it is not text)") \
                from None
        except OSError as exc:
            raise UsageError.from_oserror(exc, f"cannot read batch script {path}") from None
        name = os.path.basename(path)
    if not wrap and not script.startswith("#!"):
        raise UsageError(f"{path}: a batch script must start with '#!' (e.g. #!/bin/sh)")
    directives = read_directives(script, path)
    if directives:
        params = merge_directives(ctx, params, directives)
    params["output"] = params["output"] or "fluxlite-{{id}}.out"
    with handle() as h:
        spec = _instance_spec(h, ["{{script}}", *script_args], params, name=name,
                              system={"batch": {"script": script}})
        if params["dry_run"]:
            from .submit import dry_run
            dry_run(spec)
        from ..jobapi import api
        from ..util import fluid
        resp = api.submit_full(h, spec, params["urgency"])
    if not params["quiet"]:
        click.echo(fluid.f58(resp["id"]))
    if "exception" in resp:
        print(f"fluxlite batch: job {fluid.f58(resp['id'])}: {resp['exception']['note']}",
              file=sys.stderr)
        sys.exit(1)


@click.command(context_settings=NO_INTERSPERSED)
@apply(SLOTS + COMMON + INSTANCE + SUBMITTING)
@click.option("--bg", is_flag=True,
              help="Start the instance and return once it is up; print its job id.  "
                   "Enter it with `fluxlite proxy ID`, end it with `fluxlite cancel ID` or "
                   "`fluxlite proxy ID fluxlite shutdown`.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def alloc(bg, command, **params):
    """Run a new instance as a job with your terminal attached.

    With COMMAND, it runs as the instance's initial program and alloc exits
    with its status; without, an interactive $SHELL runs inside the instance.
    Instance jobs default to exit-timeout=none (set -o exit-timeout= to change
    it) and --persist.
    """
    from ..jobapi import api
    from ..util import fluid
    from .attach import Attach
    command = list(command)
    if bg and command:
        raise UsageError("--bg takes no COMMAND (use `fluxlite proxy ID COMMAND` once it is up)")
    interactive = not command and not bg
    with handle() as h:
        if bg:
            spec = _instance_spec(h, [], dict(params, setattr=params.get("setattr")),
                                  name="fluxlite", extra_broker_opts=["-Sbroker.rc2-none=1"])
        elif interactive:
            shell = os.environ.get("SHELL") or "/bin/sh"
            spec = _instance_spec(h, [shell, "-i"] if sys.stdin.isatty() else [shell],
                                  dict(params, setopt={**(params.get("setopt") or {}),
                                                       "pty.interactive": 1}
                                       if sys.stdin.isatty() else params.get("setopt")),
                                  name="fluxlite")
        else:
            spec = _instance_spec(h, command, params, name=os.path.basename(command[0]))
        if params["dry_run"]:
            from .submit import dry_run
            dry_run(spec)
        resp = api.submit_full(h, spec, params["urgency"])
        jobid = resp["id"]
        if params["verbose"]:  # as Flux's alloc -v: the job id on stderr
            print(f"jobid: {fluid.f58(jobid)}", file=sys.stderr)
        if bg:
            wait_for_instance(h, jobid)
            if not params["quiet"]:
                click.echo(fluid.f58(jobid))
            return 0
        if interactive and sys.stdin.isatty():
            from .pty import attach_pty
            sys.exit(attach_pty(h, jobid))
        sys.exit(Attach(h, jobid, prog="fluxlite alloc").run())


def wait_for_instance(h, jobid: int, timeout: float = 120.0) -> str:
    """Follow the job until its instance recorded its URI and is running; return the URI."""
    from ..client.sync import Handle
    from ..jobapi import api
    from ..util import fluid
    uri = None
    for e in api.event_watch(h, jobid, timeout=timeout):
        name, ctx = e.get("name"), e.get("context") or {}
        if name == "memo" and "uri" in ctx:
            uri = ctx["uri"]
            break
        if name == "exception" and ctx.get("severity") == 0:
            raise FluxliteError(f"job {fluid.f58(jobid)} failed before its instance came up: "
                                f"{ctx.get('note')}")
        if name == "clean":
            break
    if uri is None:
        raise FluxliteError(f"job {fluid.f58(jobid)} ended before its instance came up")
    with Handle(uri) as child:
        state = child.call("broker.state", nodeid=0, timeout=timeout)["state"]
        if state not in ("run", "quorum"):
            raise FluxliteError(f"instance of job {fluid.f58(jobid)} is {state}")
    return uri
