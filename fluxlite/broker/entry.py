"""What the CLI uses of the broker package, and all it uses (`fluxlite start`,
`fluxlite broker`, batch/alloc --conf): the attributes an instance starts with
and their checks, and the three ways brokers start: N on this machine
(launcher.py), one under a PMI launcher or as a task of a batch/alloc job
(nested.py), one of the hosts a config file lists (boot_config.py).  The CLI
reaches the rest of the broker only by RPC, as it does services, the router and
the overlay (tests/unit/test_layers.py).

Each function imports what it needs when it is called, so that importing the
CLI does not load the broker.
"""

from __future__ import annotations


def build_attrs(conf, setattrs, *, base: dict[str, str] | None = None,
                bootstrap: bool = False, **direct) -> dict[str, str]:
    """The attributes brokers start with: the defaults, then `base`, the config
    sources `conf` (a path, or a list of paths and config objects, merged in order),
    the named options (`direct`, None: not given), and -S NAME=VALUE.  config.path
    names the first path (absolute), as in Flux; with more than that one path,
    config.sources lists them all: `config reload` reads them again."""
    import json
    import os

    from . import attrs as battrs
    values = battrs.defaults()
    values.update(base or {})
    sources = [conf] if isinstance(conf, str) else list(conf or ())
    for source in sources:
        if isinstance(source, dict):
            values.update(battrs.table_config(source, "--conf"))
        else:
            values.update(battrs.load_config(source, bootstrap=bootstrap))
    paths = [os.path.abspath(s) for s in sources if isinstance(s, str)]
    if paths:
        values["config.path"] = paths[0]
    if sources and (len(sources) > 1 or not paths):
        values["config.sources"] = json.dumps(
            [os.path.abspath(s) if isinstance(s, str) else s for s in sources])
    for name, value in direct.items():
        if value is not None:
            values[name] = battrs.check(name, value)
    for item in setattrs:
        name, value = battrs.parse_setattr(item)
        values[name] = value
    return values


def conf_options(attrs: dict[str, str]) -> list[str]:
    """The --conf options that give a broker started by command line (start --wrap,
    -v) the config sources of `attrs`, in order (attrs.conf_options)."""
    from . import attrs as battrs
    return battrs.conf_options(attrs)


def read_config(path: str) -> dict:
    """The config object at `path` as written, unchecked (`config get -c`, `config
    load PATH`): a directory's *.toml merged in name order, a *.json file, or a TOML
    file.  An unreadable file fails with its errno, bad TOML or JSON is a UsageError."""
    from . import attrs as battrs
    return battrs.read_toml(path)


def config_attrs(config: dict, where: str) -> dict[str, str]:
    """The attributes a config object sets, each checked as brokers will take it
    (UsageError naming `where` if they would not), Flux's key spellings read as
    fluxlite's and Flux's tables of no meaning here left out: what batch/alloc
    --conf give the new instance as -S options."""
    from . import attrs as battrs
    return battrs.config_values(config, where)


def launch(size: int, attrs: dict[str, str], command: list[str], *,
           mode: dict | None = None, **options) -> int:
    """`size` brokers on this machine; rank 0 runs `command` (launcher.launch).
    `mode`: Flux's flux-start options, the fields of launcher.StartMode."""
    from .launcher import StartMode
    from .launcher import launch as launch_here
    return launch_here(size, attrs, command, mode=StartMode(**(mode or {})), **options)


def run_local_rank(rank: int, size: int, attrs: dict[str, str], rundir: str,
                   command: list[str], **options) -> int:
    """This process as one rank of a `fluxlite start` instance, from the command line
    the launcher runs under --wrap (launcher.run_rank)."""
    from .launcher import run_rank
    return run_rank(rank, size, attrs, rundir, command, **options)


def run_pmi_broker(attrs: dict[str, str], command: list[str], **options) -> int:
    """This process as one broker whose rank and size come from PMI (nested.py)."""
    from .nested import run_pmi_broker as run_under_pmi
    return run_under_pmi(attrs, command, **options)


def run_config_broker(path: str, setattrs, command: list[str], *, hostname: str | None,
                      rundir: str | None, insecure: bool) -> int:
    """This process as the broker of this host (or `hostname`) among those of the
    config's [bootstrap] table (a file, or a directory of them); its other tables
    are attributes."""
    import socket

    from . import attrs as battrs
    from . import boot_config
    config = boot_config.load(path, insecure=insecure)
    place = config.place(hostname or socket.gethostname())
    base = battrs.TCP_DEFAULTS if boot_config.uses_tcp(place) else None
    attrs = build_attrs(path, setattrs, base=base, bootstrap=True)
    return boot_config.run(config, place, attrs, command, rundir=rundir, insecure=insecure)
