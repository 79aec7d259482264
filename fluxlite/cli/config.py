"""`fluxlite config`: Flux's flux-config(1) (get, set, unset, load, reload, builtin).

The instance's config is one object of TOML tables, kept by the `config`
service (service/admin.py): `get` reads it (`config.get`), or with -c a config
file or directory offline; `set`, `unset` and `load` replace it (`config.load`,
the owner's, on rank 0, as in Flux); `reload` has the broker read its config path
again (`config.reload`); `builtin` prints where fluxlite keeps what Flux's
compiled-in paths name.  Output, messages and exit codes are Flux's.
"""

from __future__ import annotations

import json
import os
import sys

import click

from ..errors import FluxliteError, NotFound, UsageError
from .common import HELP, handle

TYPES = ("string", "integer", "real", "boolean", "object", "array", "any", "fsd",
         "fsd-integer", "fsd-real")
SET_TYPES = ("string", "integer", "real", "boolean", "object", "array", "fsd")

# `config get -c system|security|imp`: Flux's compiled-in config directories, so that
# a Flux site's config is read where Flux keeps it (${sysconfdir}/flux)
CONFDIR = "/etc/flux"


@click.group(context_settings=HELP)
def config():
    """Show and change the instance configuration: get, set, unset, load, reload,
    builtin."""


# -------------------------------------------------------------------------- get
@config.command("get", context_settings=HELP)
@click.option("-c", "--config-path", "config_path", default=None,
              metavar="PATH|system|security|imp",
              help="Read the config at PATH (a directory of *.toml, a .json or TOML "
                   "file) instead of the instance's; no instance is needed.")
@click.option("-t", "--type", "typ", type=click.Choice(TYPES, case_sensitive=False),
              default="any", show_default=True,
              help="Check the value's type (fsd: print it in seconds).")
@click.option("-d", "--default", "default", default=None, metavar="VALUE",
              help="Print VALUE if NAME is not set.")
@click.option("-q", "--quiet", is_flag=True, help="Say nothing if NAME is not set (exit 1).")
@click.argument("name", required=False)
def config_get(config_path, typ, default, quiet, name):
    """Print the configuration as JSON, or the value of NAME (a dotted key such as
    tbon.topo; a string prints bare).  Exit 1 if NAME is not set."""
    if config_path is not None:
        value = read_path(_named_path(config_path))
    else:
        with handle() as h:
            value = h.call("config.get", nodeid=None)
    if name:
        try:
            value = _lookup(value, name)
        except KeyError:
            if default is not None:
                click.echo(default)
                return 0
            if quiet:
                sys.exit(1)
            raise NotFound(f"{name} is not set") from None
    click.echo(_typed(value, typ.lower(), name or "value"))


def _named_path(path: str) -> str:
    if path in ("system", "security", "imp"):
        return os.path.join(CONFDIR, path, "conf.d")
    return path


def read_path(path: str) -> dict:
    """The config object at `path`, as written (errors: one line naming the path)."""
    from ..broker import entry
    return entry.read_config(path)


def _lookup(value, name: str):
    """The value at dotted NAME (KeyError if a part is missing)."""
    for part in _parts(name):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(name)
        value = value[part]
    return value


def _parts(name: str) -> list[str]:
    parts = name.split(".")
    if "" in parts:
        raise UsageError(f"invalid key {name!r}: a dotted name such as tbon.topo")
    return parts


def _typed(value, typ: str, name: str) -> str:
    """`value` printed as Flux prints it, if it has type `typ` (else an error)."""
    from ..util import fsd
    wrong = FluxliteError(f"{name} does not have the requested type")
    if typ.startswith("fsd"):
        if not isinstance(value, str):
            raise wrong
        try:
            secs = fsd.parse(value)
        except fsd.FSDError:
            raise wrong from None
        return str(int(secs)) if typ == "fsd-integer" else (
            f"{secs:f}" if typ == "fsd-real" else value)
    checks = {"string": str, "integer": int, "real": (int, float), "boolean": bool,
              "object": dict, "array": list}
    if typ in checks and (not isinstance(value, checks[typ]) or
                          (typ in ("integer", "real") and isinstance(value, bool))):
        # an attribute given as text (-S NAME=VALUE) may still read as the type asked for
        converted = _convert(value, typ)
        if converted is None:
            raise wrong
        value = converted
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


def _convert(value, typ: str):
    if not isinstance(value, str):
        return None
    try:
        if typ == "integer":
            return int(value)
        if typ == "real":
            return float(value)
        if typ == "boolean" and value in ("0", "1", "true", "false"):
            return value in ("1", "true")
    except ValueError:
        return None
    return None


# -------------------------------------------------------------------- set, unset
@config.command("set", context_settings=dict(HELP, ignore_unknown_options=True))
@click.option("-t", "--type", "typ", default=None, metavar="TYPE",
              help="VALUE's type: string, integer, real, boolean, object, array or fsd "
                   "(default: the type of NAME's value now; needed if NAME is not set).")
@click.argument("name")
@click.argument("value")
def config_set(typ, name, value):
    """Set NAME (a dotted key) to VALUE in the instance's config, which then takes
    effect as `config load` would.  Rank 0 only; the instance owner's."""
    if typ is not None:
        typ = typ.lower()
        if typ in ("fsd-integer", "fsd-real"):
            raise UsageError(f"Invalid type for the set subcommand: {typ}")
        if typ not in SET_TYPES:
            raise UsageError(f"Unknown type: {typ} (one of {', '.join(SET_TYPES)})")
    parts = _parts(name)
    with handle() as h:
        obj = h.call("config.get", nodeid=None)
        if typ is None:
            try:
                old = _lookup(obj, name)
            except KeyError:
                raise UsageError("Type is unknown, please specify --type") from None
            typ = _type_of(old)
        node = obj
        for i, part in enumerate(parts[:-1]):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise UsageError(f"Error updating config object: "
                                 f"{'.'.join(parts[:i + 1])} is not a table")
        node[parts[-1]] = _parse_value(value, typ)
        _load(h, obj, "Error updating config object")


@config.command("unset", context_settings=HELP)
@click.argument("name")
def config_unset(name):
    """Remove NAME (a dotted key) from the instance's config (nothing if it is not
    there); it then takes effect as `config load` would.  Rank 0 only; the owner's."""
    parts = _parts(name)
    with handle() as h:
        obj = h.call("config.get", nodeid=None)
        node = obj
        for part in parts[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(parts[-1], None)
        _load(h, obj, "Error updating config object")


def _type_of(value) -> str:
    if isinstance(value, bool):
        return "boolean"
    for typ, cls in (("integer", int), ("real", float), ("object", dict),
                     ("array", list)):
        if isinstance(value, cls):
            return typ
    return "string"


def _parse_value(text: str, typ: str):
    """VALUE as flux config set reads it for TYPE."""
    if typ == "boolean":   # as Flux: 0, f..., F... or empty is false, the rest true
        return not (text == "" or text[0] in "0fF")
    if typ == "integer":
        try:
            return int(text, 0)
        except ValueError:
            raise UsageError(f"Error parsing integer value: {text!r}") from None
    if typ == "real":
        try:
            return float(text)
        except ValueError:
            raise UsageError(f"Error parsing real value: {text!r}") from None
    if typ in ("object", "array"):
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict if typ == "object" else list):
            raise UsageError(f"Error parsing json {typ}: {text!r}")
        return parsed
    if typ == "fsd":
        from ..util import fsd
        try:
            fsd.parse(text)
        except fsd.FSDError:
            raise UsageError(f"Error parsing Flux Standard Duration: {text!r}") from None
    if text.startswith('"'):
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if not isinstance(parsed, str):
            raise UsageError(f"Error parsing string: {text!r}")
        return parsed
    return text


def _load(h, obj: dict, what: str) -> None:
    try:
        h.call("config.load", obj, nodeid=None)
    except FluxliteError as exc:
        raise type(exc)(f"{what}: {exc.message}", exc.errnum) from None


# ------------------------------------------------------------------ load, reload
@config.command("load", context_settings=HELP)
@click.argument("path", required=False)
def config_load(path):
    """Replace the instance's config with the one at PATH (a directory of *.toml,
    a .json or TOML file), or, without PATH, the JSON or TOML on standard input.
    Rank 0 only; the instance owner's."""
    if path is not None:
        try:
            obj = read_path(path)
        except FluxliteError as exc:
            raise type(exc)(f"Error parsing config: {exc.message}", exc.errnum) from None
    else:
        obj = _parse_stdin(sys.stdin.buffer.read())
    with handle() as h:
        _load(h, obj, "load")


def _parse_stdin(data: bytes) -> dict:
    try:
        try:
            obj = json.loads(data)
        except ValueError:
            import tomllib
            try:
                obj = tomllib.loads(data.decode())
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                raise UsageError(f"TOML parse error: {exc}") from None
    except RecursionError:
        raise UsageError("standard input: tables or arrays nested too deeply") from None
    if not isinstance(obj, dict):
        raise UsageError(f"standard input is JSON {type(obj).__name__}, not a config "
                         "object (a table of tables)")
    return obj


@config.command("reload", context_settings=HELP)
@click.option("--follower-noop", is_flag=True,
              help="Do nothing on a rank other than 0 (for service managers).")
def config_reload(follower_noop):
    """Read the config path the instance started with (--conf) again and put it in
    effect; an instance started without one keeps its config.  Rank 0 only; the
    instance owner's."""
    with handle() as h:
        if follower_noop and int(h.getattr("rank")) > 0:
            return 0
        try:
            h.call("config.reload", nodeid=None)
        except FluxliteError as exc:
            raise type(exc)(f"reload: {exc.message}", exc.errnum) from None


# ---------------------------------------------------------------------- builtin
def _builtin_values() -> dict[str, str]:
    """Flux's builtin names that have a fluxlite equivalent, and its value here."""
    from ..util.compat import compat_dirs
    bindir, pydir = compat_dirs()
    return {
        "confdir": CONFDIR,                       # where `config get -c system` reads
        "rundir": _rundir_parent(),               # where run directories are made
        "python_path": pydir,                     # the `flux` package of `compat env`
        "exec_path": bindir,                      # the `flux` command of `compat env`
    }


def _rundir_parent() -> str:
    import tempfile
    return "/tmp" if os.path.isdir("/tmp") else tempfile.gettempdir()   # util/paths.py


# Flux's builtin names with nothing behind them here, and why
NOT_HERE = {
    "rc1_path": "no rc1 script: services are built into the broker",
    "rc3_path": "no rc3 script: services are built into the broker",
    "shell_path": "the job shell is forked by the broker, not run from a file",
    "shell_pluginpath": "job shell plugins are not loaded from files",
    "shell_initrc": "the job shell reads no initrc",
    "jobtap_pluginpath": "the job-manager loads no jobtap plugins from files",
    "libexecdir": "no libexec directory: commands are built in",
    "lua_cpath_add": "no Lua", "lua_path_add": "no Lua",
    "man_path": "no man pages (`fluxlite COMMAND --help`)",
    "connector_path": "no connector plugins: one built-in transport",
    "module_path": "no broker modules: services are built in",
    "pmi_library_path": "no libpmi: tasks reach PMI through PMI_FD or PMIx",
    "cmdhelp_pattern": "no command help files (`fluxlite --help`)",
    "no_docs_path": "no documentation files",
}


@config.command("builtin", context_settings=HELP)
@click.option("--intree", is_flag=True, help="Accepted (fluxlite's paths are the same).")
@click.option("--installed", is_flag=True, help="Accepted (fluxlite's paths are the same).")
@click.argument("name")
def config_builtin(intree, installed, name):
    """Print the value of one of Flux's compiled-in config NAMEs that fluxlite has:
    confdir, rundir (where run directories are made), python_path and exec_path
    (the `flux` package and command of Flux compatibility)."""
    del intree, installed
    values = _builtin_values()
    if name in values:
        click.echo(values[name])
        return 0
    if name in NOT_HERE:
        raise UsageError(f"{name} has no value in fluxlite: {NOT_HERE[name]} (names: "
                         f"{', '.join(values)})")
    raise UsageError(f"{name} is invalid (names: {', '.join(values)})")
