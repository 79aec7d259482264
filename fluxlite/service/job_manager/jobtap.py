"""Flux's jobtap plugin interface, for the plugins built into this job-manager
(a part of JobManagerService): job-manager.jobtap (list, load, remove) and
job-manager.jobtap-query.

fluxlite's job-manager has the behaviour of Flux's built-in plugins and loads
no compiled ones.  Removing one takes its behaviour away as in Flux, and
loading it by name brings it back:

    .dependency-after  after, afterany, afterok, afternotok dependencies
    .begin-time        begin-time dependencies (`--begin-time`)
    .history           job-manager.history.get
    .priority-default  priority = urgency (fluxlite computes priorities itself:
                       it cannot be removed here)

A submission naming a dependency scheme whose plugin is removed is refused,
with Flux's words: dependency scheme "afterok" not supported.
"""

from __future__ import annotations

import fnmatch
import os
from typing import Annotated

from ...errors import AlreadyExists, NoService, NotFound, NotSupported, UsageError
from ...job import depend
from ...protocol.schema import AnyMap, Meta, Name, Struct
from ..base import ANY, handler

BUILTIN_PLUGINS = (".priority-default", ".dependency-after", ".begin-time", ".history")
FIXED = {".priority-default": "fluxlite's job-manager computes priorities itself, and no "
                              "other priority plugin can be loaded"}
SCHEME_PLUGIN = {**{s: ".dependency-after" for s in depend.AFTER},
                 depend.BEGIN_TIME: ".begin-time"}


# a plugin's name, glob or path
Plugin = Annotated[str, Meta(min_length=1, max_length=4096)]


class JobtapRequest(Struct, kw_only=True):   # Flux's query_only is the default here
    load: Plugin | None = None
    remove: Plugin | None = None
    conf: AnyMap | None = None
    query_only: bool = False


class QueryRequest(Struct, kw_only=True):
    name: Name


class Jobtap:
    """The jobtap part of JobManagerService: `jobtap_plugins` are the plugins loaded."""

    jobtap_plugins: list[str]

    def _plugins(self) -> list[str]:
        return self.jobtap_plugins

    def check_schemes(self, deps: list) -> None:
        """Refuse a dependency whose scheme's plugin is removed (submit)."""
        loaded = self._plugins()
        for dep in deps:
            plugin = SCHEME_PLUGIN.get(dep.get("scheme"))
            if plugin is not None and plugin not in loaded:
                raise UsageError(f'dependency scheme "{dep["scheme"]}" not supported')

    def plugin_loaded(self, name: str) -> bool:
        return name in self._plugins()

    @handler("job-manager.jobtap", schema=JobtapRequest)
    def jobtap(self, msg, r):
        """`jobtap list|load|remove`: remove first (a name, a glob, or all: the plugins
        not built in), then load (a built-in plugin's name); answers the list."""
        plugins = self._plugins()
        if r.query_only:
            return {"plugins": list(plugins)}
        if r.remove is not None:
            self._remove(plugins, r.remove)
        if r.load is not None:
            self._load(plugins, r.load)
        return {"plugins": list(plugins)}

    def _remove(self, plugins: list[str], arg: str) -> None:
        every = arg == "all"
        globbed = any(c in arg for c in "*?[")
        hit = [p for p in plugins
               if (every and not p.startswith("."))
               or (globbed and fnmatch.fnmatchcase(p, arg)
                   and (arg.startswith(".") or not p.startswith(".")))
               or p == arg]
        for name in hit:
            if name in FIXED:
                raise UsageError(f"{name} cannot be removed: {FIXED[name]}")
        if not hit and not every:
            raise NotFound(f"{arg}: Failed to find plugin to remove")
        for name in hit:
            plugins.remove(name)
            self.log.info("jobtap plugin removed", plugin=name)

    def _load(self, plugins: list[str], path: str) -> None:
        if path in BUILTIN_PLUGINS:
            if path in plugins:
                raise AlreadyExists(f"{path}: File exists: the plugin is loaded already")
            plugins.append(path)
            self.log.info("jobtap plugin loaded", plugin=path)
            return
        if "/" in path or path.endswith(".so"):
            if os.path.exists(path):
                raise NotSupported(f"{path}: fluxlite's job-manager cannot load compiled "
                                   "jobtap plugins; its plugins are built in: "
                                   f"{', '.join(BUILTIN_PLUGINS)}")
        raise NotFound(f"{path}: No such file or directory: not a built-in plugin "
                       f"({', '.join(BUILTIN_PLUGINS)}), and fluxlite loads no others")

    @handler("job-manager.jobtap-query", schema=QueryRequest, roles=ANY)
    def jobtap_query(self, msg, r):
        """What `jobtap query NAME` prints: the plugin's name and path, and what it
        does here."""
        if r.name not in self._plugins():
            raise NotFound(f"{r.name}: no such plugin is loaded")
        out = {"name": r.name, "path": "builtin"}
        if r.name == ".history":
            out["jobs"] = len(self.jobs)
        schemes = sorted(s for s, p in SCHEME_PLUGIN.items() if p == r.name)
        if schemes:
            out["schemes"] = schemes
        return out

    def module_stats(self) -> dict:
        """What `module stats job-manager` adds to the message counters (Flux's
        job-manager answers these keys too)."""
        return {"journal": {"listeners": len(self.journal)},
                "active_jobs": self.n_active, "inactive_jobs": len(self.inactive)}

    def require_plugin(self, name: str, topic: str) -> None:
        """A method a plugin registers fails ENOSYS while the plugin is removed."""
        if not self.plugin_loaded(name):
            raise NoService(f"No service matching {topic} is registered ({name} "
                            "jobtap plugin removed)")
