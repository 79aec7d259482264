"""Jobs as data: jobspec build/validate, states and results, resource sets (R),
eventlog entries and KVS keys, and the small client API the CLI uses.

`Jobspec` (jobspec.py) builds jobspecs, schema.py checks them at submit;
`Executor` (executor.py) runs them as concurrent.futures futures."""


def __getattr__(name):
    # imported on use: the CLI never pays for asyncio, nor for msgspec (the
    # job-manager checks what it submits)
    if name == "Executor":
        from .executor import Executor
        return Executor
    if name == "Jobspec":
        from .jobspec import Jobspec
        return Jobspec
    raise AttributeError(name)
