"""Jobs as data: jobspec build/validate, states and results, resource sets (R),
eventlog entries and KVS keys, and the small client API the CLI uses.

`Jobspec` (jobspec.py) builds jobspecs; `Executor` (executor.py) runs them as
concurrent.futures futures."""

from .jobspec import Jobspec  # noqa: F401
