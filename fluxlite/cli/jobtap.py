"""`fluxlite jobtap`: Flux's flux-jobtap(1) over the job-manager's built-in plugins.

    list     the plugins loaded (built-in ones, named with a leading '.', with -a)
    load     load a built-in plugin by name again (-r: remove NAME first)
    remove   remove plugins by name, glob, or `all` (the plugins not built in)
    query    print a plugin's description as JSON

Through `job-manager.jobtap` and `job-manager.jobtap-query`, as Flux's command;
what removing each built-in plugin takes away is in
service/job_manager/jobtap.py.  Errors print as Flux's do ("NAME not found").
"""

from __future__ import annotations

import json

import click

from ..errors import FluxliteError, NotFound, UsageError
from .common import HELP, NO_INTERSPERSED, handle
from .optvalues import json_or_text, put_dotted


@click.group(context_settings=HELP)
def jobtap():
    """Manage the job-manager's plugins: list, load, remove, query."""


def _call(payload: dict, plugin: str) -> dict:
    with handle() as h:
        try:
            return h.call("job-manager.jobtap", payload, nodeid=0)
        except NotFound as exc:
            # Flux's words, and ours after them (what the plugins here are)
            raise NotFound(f"{plugin} not found ({exc.message})") from None


@jobtap.command("list", context_settings=HELP)
@click.option("-a", "--all", "all_", is_flag=True,
              help="Include the built-in plugins (their names begin with '.').")
def jobtap_list(all_):
    """List the job-manager's jobtap plugins, one per line; built-in ones only with -a
    (this job-manager loads no others)."""
    names = _call({"query_only": True}, "")["plugins"]
    for n in names:
        if all_ or not n.startswith("."):
            click.echo(n)


def _conf(words) -> dict:
    """KEY=VAL words as one object (dotted keys nest; values are JSON if they parse)."""
    conf: dict = {}
    for w in words:
        key, eq, text = w.partition("=")
        if not eq or not key:
            raise UsageError(f"plugin configuration must be KEY=VALUE, not {w!r}")
        put_dotted(conf, key, json_or_text(text))
    return conf


@jobtap.command("load", context_settings=NO_INTERSPERSED)
@click.option("-r", "--remove", default=None, metavar="NAME",
              help="Remove plugin NAME (a glob; all: every plugin not built in) first.")
@click.argument("plugin")
@click.argument("conf", nargs=-1)
def jobtap_load(remove, plugin, conf):
    """Load PLUGIN (the name of a built-in plugin that was removed) with optional
    KEY=VAL configuration.  A compiled plugin (.so) cannot be loaded here."""
    payload = {"load": plugin}
    if conf:
        payload["conf"] = _conf(conf)
    if remove:
        payload["remove"] = remove
    _call(payload, plugin)


@jobtap.command("remove", context_settings=HELP)
@click.argument("plugin")
def jobtap_remove(plugin):
    """Remove the plugins named PLUGIN: a name, a shell glob, or all (every plugin not
    built in).  Removing a built-in one takes its behaviour away until it is loaded
    again (.dependency-after: after* dependencies are refused)."""
    _call({"remove": plugin}, plugin)


@jobtap.command("query", context_settings=HELP)
@click.argument("plugin")
def jobtap_query(plugin):
    """Print what the plugin PLUGIN says of itself, as JSON."""
    with handle() as h:
        try:
            got = h.call("job-manager.jobtap-query", {"name": plugin}, nodeid=0)
        except FluxliteError as exc:
            raise type(exc)(f"{plugin}: {exc.message}" if not exc.message.startswith(
                plugin) else exc.message) from None
    click.echo(json.dumps(got))
