"""Jobs as data: jobspec build/validate, states and results, resource sets (R),
eventlog entries and KVS keys, and the pure per-job state machines.  Nothing here
talks to an instance: the job API on a handle (submit, wait, event_watch, the
Executor, the journal) is fluxlite.jobapi.

`Jobspec` (jobspec.py) builds jobspecs, schema.py checks them at submit."""

# the job API's names, which lived here before fluxlite.jobapi
_MOVED = {"api", "aio", "executor", "journal", "Executor"}


def __getattr__(name):
    # imported on use: the CLI never pays for msgspec (the job-manager checks
    # what it submits)
    if name == "Jobspec":
        from .jobspec import Jobspec
        return Jobspec
    if name in _MOVED:
        raise ImportError(f"fluxlite.job.{name} is now fluxlite.jobapi.{name}")
    raise AttributeError(name)
