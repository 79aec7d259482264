"""Flux's config keys and tables that fluxlite accepts without using them.

A Flux config file must start fluxlite unchanged (docs/guide.md, section 7).
`load_config` reads the keys fluxlite has (attrs.ATTRIBUTES) and asks here
about every other one:

- a key of a table fluxlite reads (`[resource]`, `[tbon]`, `[exec]`,
  `[job-manager]`) that Flux documents (flux-config-resource(5) and friends)
  but that has no meaning here is accepted and ignored: IGNORED_KEYS;
- a table fluxlite does not read (one of a Flux component fluxlite does not
  have: Fluxion's `[sched-fluxion-qmanager]`, `[sched-simple]`, `[ingest]`,
  `[kvs]`, ...; or a site's plugin's) is accepted whole and ignored, as Flux's
  broker refuses no table (each module reads its own);
- an unknown key inside a table fluxlite reads is still an error (a typo
  there would otherwise be silent), as Flux's own modules refuse one.

ALIASES are Flux's spellings of keys fluxlite has under another name.
"""

from __future__ import annotations

# tables fluxlite reads some keys of; an unknown key in one is an error
READ_TABLES = ("resource", "tbon", "exec", "job-manager", "broker", "batch", "content",
               "queues", "policy", "access")

# Flux keys of those tables that mean nothing here (prefixes: a table under one
# of them, such as [resource.verify] or [[job-manager.plugins]], goes with it)
IGNORED_KEYS = (
    # flux-config-resource(5): hwloc verification and restriction, the resource
    # module's journal and eventlog history, R's scheduling key
    "resource.verify", "resource.norestrict", "resource.rediscover",
    "resource.no-update-watch", "resource.journal-max", "resource.history",
    "resource.scheduling", "resource.reserve",
    # flux-config-tbon(5): ZeroMQ tuning and interface selection
    "tbon.torpid_min", "tbon.tcp_user_timeout", "tbon.zmqdebug", "tbon.zmq_io_threads",
    "tbon.child_rcvhwm", "tbon.interface-hint", "tbon.prefertcp",
    # flux-config-exec(5): the IMP, systemd execution and signal tuning
    "exec.imp", "exec.service", "exec.service-override", "exec.method", "exec.job-shell",
    "exec.max-kill-count", "exec.max-kill-timeout", "exec.term-signal", "exec.kill-signal",
    "exec.max-start-delay-percent", "exec.testexec", "exec.sdexec-constrain-resources",
    "exec.sdexec-properties", "exec.sdexec-stop-timer-sec",
    "exec.sdexec-stop-timer-signal", "exec.mpi",
    # flux-config-job-manager(5): jobtap plugins, housekeeping, the journal
    "job-manager.stop-queues-on-restart", "job-manager.plugins", "job-manager.housekeeping",
    "job-manager.journal-size-limit", "job-manager.prolog", "job-manager.epilog",
    "job-manager.perilog",
    # flux-config-access(5): guests' view of others' jobs, and roles
    "access.private-mode", "access.roles",
)

# Flux's spelling -> fluxlite's key of the same meaning
ALIASES = {"tbon.torpid_max": "tbon.torpid-timeout",
           "tbon.connect_timeout": "tbon.connect-timeout"}



def ignored(name: str) -> bool:
    """Whether the dotted config key `name`, which fluxlite does not have, is one
    to accept and ignore (a Flux key of no meaning here, or another component's
    table) rather than refuse."""
    top = name.split(".", 1)[0]
    if top not in READ_TABLES:
        return True
    return any(name == k or name.startswith(k + ".") for k in IGNORED_KEYS)

