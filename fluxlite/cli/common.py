"""Helpers shared by CLI commands: opening a handle, parsing ids, printing errors."""

from __future__ import annotations

import click

from ..errors import UsageError

NO_INTERSPERSED = {"allow_interspersed_args": False, "help_option_names": ["-h", "--help"]}
HELP = {"help_option_names": ["-h", "--help"]}


def kvs_namespace_option(flag: str = "-N", name: str = "--namespace", what: str = ""):
    """A kvs command's namespace option; as Flux's, without it the command works in
    $FLUXLITE_KVS_NAMESPACE or $FLUX_KVS_NAMESPACE (a job's tasks: its guest
    namespace), else the primary one."""
    from ..util.compat import KVS_NAMESPACE_VARS
    return click.option(flag, name, metavar="NAME", envvar=KVS_NAMESPACE_VARS,
                        help=f"Work in KVS namespace NAME{what} (default: "
                        "$FLUX_KVS_NAMESPACE, else primary).")


def is_eventlog(value) -> bool:
    """A KVS value that is an eventlog: a list of {timestamp, name[, context]} entries."""
    return isinstance(value, list) and bool(value) and all(
        isinstance(e, dict) and "timestamp" in e and "name" in e for e in value)


def echo_value(value) -> None:
    """Print a KVS value as Flux does: a string as it is, an eventlog one compact JSON
    object a line (scripts read them line by line), anything else as JSON."""
    import json
    if isinstance(value, str):
        click.echo(value)
    elif is_eventlog(value):
        click.echo("\n".join(json.dumps(e, separators=(",", ":")) for e in value))
    else:
        click.echo(json.dumps(value))


def handle(uri: str | None = None):
    """A blocking handle to the instance at FLUXLITE_URI (or `uri`)."""
    from ..client.sync import Handle
    return Handle(uri)


def parse_jobid(text: str) -> int:
    from ..util import fluid
    try:
        return fluid.parse(text)
    except ValueError:
        raise UsageError(f"error parsing jobid: {text!r}") from None


class RankType(click.ParamType):
    name = "RANK"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        if not str(value).isdigit():
            self.fail(f"{value!r} is not a rank (a non-negative integer)", param, ctx)
        return int(value)


RANK = RankType()


def fsd_timeout(ctx, param, value):
    """click callback: a --timeout given as an FSD ("30s", "2m"), None when absent."""
    if value is None:
        return None
    from ..util import fsd
    try:
        return fsd.parse_timeout(value)
    except fsd.FSDError as exc:
        raise click.BadParameter(str(exc)) from None


class JobID(click.ParamType):
    name = "JOBID"

    def __init__(self, as_flux_job: bool = False):
        self.as_flux_job = as_flux_job

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        try:
            return parse_jobid(value)
        except UsageError as exc:
            if self.as_flux_job:  # flux-job's own words and exit status (1, not 2)
                raise UsageError(f'error parsing jobid: "{value}"') from None
            self.fail(exc.message, param, ctx)


JOBID = JobID()
JOB_JOBID = JobID(as_flux_job=True)   # for `job SUBCOMMAND`, as Flux's flux-job says it
