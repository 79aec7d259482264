"""Jobs as data: jobspec build/validate, states and results, resource sets (R),
eventlog entries and KVS keys, and the small client API the CLI uses.

`Jobspec` (jobspec.py) builds jobspecs; `Executor` (executor.py) runs them as
concurrent.futures futures."""

from .jobspec import Jobspec  # noqa: F401


def __getattr__(name):
    if name == "Executor":  # imported on use: the CLI never pays for asyncio
        from .executor import Executor
        return Executor
    raise AttributeError(name)
