"""Layers point down: each room of the package imports only rooms below it.

    errors, the package itself (__version__)
    util
    protocol, pmi                      (codec, frames, RPC tracker, the dispatcher; PMI wire)
    client, router, overlay, job       (handles; routing; tree links; job data: jobspecs,
                                        states, eventlogs, R, knowing no handle)
    service, shell, jobapi             (in-broker services; the job shell on a client; the
                                        job API on a handle: api, aio, Executor, journal)
    broker                             (the one place that wires the parts)
    cli, testing                       (commands, test helpers; the CLI reaches services,
                                        the router and the overlay only by RPC, and the
                                        broker only through broker/entry.py)
    compat                             (the Flux compatibility layer, on the CLI)

The check reads every module's imports (also those inside functions) with `ast`,
so a lazy import cannot hide an upward one.
"""

import ast
import pathlib

import fluxlite

LAYER = {
    "errors": 0, "util": 1,
    "protocol": 2, "pmi": 2,
    "client": 3, "router": 3, "overlay": 3, "job": 3,
    "service": 4, "shell": 4, "jobapi": 4,
    "broker": 5,
    "cli": 6, "testing": 6, "compat": 7, "__main__": 8,
    "__init__": 0,  # the package itself holds only __version__
}
ROOT = pathlib.Path(fluxlite.__file__).parent


def room_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1].startswith("__") and parts[1] != "__main__":
        return "__init__"  # the package itself (fluxlite.__version__)
    return parts[1]


def imports(path: pathlib.Path, module: str) -> set[str]:
    """Every fluxlite module `path` imports (as dotted names): `from ..service import
    kvs` names both the package and the submodule fluxlite.service.kvs."""
    known = {mod for _, mod in modules()}
    tree = ast.parse(path.read_text(), str(path))
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("fluxlite")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("fluxlite"):
                continue
            if node.module is None or target == "fluxlite":
                out |= {f"{target}.{a.name}" for a in node.names}
            else:
                out.add(target)
                out |= {f"{target}.{a.name}" for a in node.names} & known
    return out


def modules():
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield path, ".".join(parts)


def test_every_room_has_a_layer():
    rooms = {room_of(mod) for _, mod in modules()}
    assert rooms <= set(LAYER), f"rooms without a layer: {sorted(rooms - set(LAYER))}"


def test_imports_point_down():
    upward = []
    for path, mod in modules():
        src = room_of(mod)
        for target in imports(path, mod):
            dst = room_of(target)
            if dst == src:
                continue
            if LAYER.get(dst, 99) >= LAYER[src]:
                upward.append(f"{mod} imports {target} ({src} -> {dst})")
    assert not upward, "imports that point up or sideways:\n" + "\n".join(upward)


# The CLI (and the compatibility layer on it) reaches services, the router and the
# overlay only by RPC, and the broker only through its one entry point: the
# commands that start brokers (`fluxlite start`, `fluxlite broker`), the check
# of batch/alloc --conf, and `config get -c`/`config load PATH` (a config read as
# brokers read it)
BY_RPC_ONLY = {"service", "router", "overlay"}
BROKER_ENTRY = "fluxlite.broker.entry"
BROKER_ENTRY_USERS = {"fluxlite.cli.start", "fluxlite.cli.optvalues", "fluxlite.cli.config"}


def test_cli_reaches_services_router_and_overlay_only_by_rpc():
    bad = [f"{mod} imports {target}" for path, mod in modules()
           if room_of(mod) in ("cli", "compat")
           for target in imports(path, mod) if room_of(target) in BY_RPC_ONLY]
    assert not bad, "the CLI reaches these by RPC only:\n" + "\n".join(bad)


def test_cli_starts_brokers_through_one_entry_point():
    bad, users = [], set()
    for path, mod in modules():
        if room_of(mod) not in ("cli", "compat"):
            continue
        for target in imports(path, mod):
            if room_of(target) != "broker":
                continue
            if target in (BROKER_ENTRY, "fluxlite.broker"):
                users.add(mod)
            else:
                bad.append(f"{mod} imports {target}")
    assert not bad, f"the CLI uses the broker through {BROKER_ENTRY} only:\n" + \
        "\n".join(bad)
    assert users == BROKER_ENTRY_USERS, f"{BROKER_ENTRY} used by {sorted(users)}"


def test_the_broker_entry_point_is_what_the_cli_starts_brokers_with():
    from fluxlite.broker import entry
    public = {n for n in vars(entry) if not n.startswith("_") and callable(getattr(entry, n))}
    assert public == {"build_attrs", "config_attrs", "conf_options", "read_config",
                      "launch", "run_pmi_broker", "run_config_broker", "run_local_rank"}


def test_submodule_imports_are_resolved():
    """`from ..job import schema as jschema` is an edge to fluxlite.job.schema, so a
    cycle through such an import is seen."""
    got = imports(ROOT / "service" / "job_exec.py", "fluxlite.service.job_exec")
    assert {"fluxlite.job", "fluxlite.job.schema", "fluxlite.job.execution",
            "fluxlite.util.idset"} <= got
    assert "fluxlite.util.os" not in got     # only names that are modules


def test_no_import_cycle_between_modules():
    graph = {mod: {t for t in imports(p, mod)} for p, mod in modules()}
    names = set(graph)
    graph = {m: {t for t in ts if t in names and t != m} for m, ts in graph.items()}
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(m, stack):
        state[m] = 1
        for t in graph[m]:
            if state.get(t) == 1:
                cycle.extend(stack[stack.index(t):] + [t] if t in stack else [m, t])
                return True
            if t not in state and visit(t, stack + [t]):
                return True
        state[m] = 2
        return False

    for m in sorted(graph):
        if m not in state and visit(m, [m]):
            break
    # a package's __init__ importing its own submodules is not a cycle of concern
    assert not cycle, "import cycle: " + " -> ".join(cycle)


def test_submitting_from_the_cli_imports_neither_asyncio_nor_msgspec():
    """`fluxlite run`/`submit` build a jobspec and submit it with the blocking handle:
    asyncio and msgspec (~30 ms and ~6 ms of start-up) stay the broker's.  The
    job-manager checks the jobspec, and the command prints its message."""
    import subprocess
    import sys
    code = ("import sys\n"
            "from fluxlite.cli import main\n"
            "from fluxlite.cli import submit, attach, bulksubmit, batch\n"
            "from fluxlite.cli.options import jobspec_from\n"
            "from fluxlite.client.sync import Handle\n"
            "from fluxlite.jobapi import api\n"
            "jobspec_from(['true'], {'ntasks': 2, 'output': 'o.{{id}}'})\n"
            "print(sorted(m for m in ('asyncio', 'msgspec') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_job_api_names_once_in_job_point_to_jobapi():
    """A program written when the job API lived in fluxlite.job is told where it went."""
    import pytest
    with pytest.raises(ImportError, match=r"fluxlite\.job\.Executor is now fluxlite\.jobapi"):
        from fluxlite.job import Executor  # noqa: F401
    with pytest.raises(ImportError, match=r"fluxlite\.job\.api is now fluxlite\.jobapi\.api"):
        from fluxlite.job import api  # noqa: F401
    from fluxlite.job import Jobspec
    from fluxlite.jobapi import Executor, api  # noqa: F401
    assert Jobspec.__module__ == "fluxlite.job.jobspec"
    assert Executor.__module__ == "fluxlite.jobapi.executor"
