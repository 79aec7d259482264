"""The job API on a client handle: what a program (and the CLI) calls to submit,
watch, wait for and control jobs in a running instance.

`api` (blocking, on `fluxlite.client.sync.Handle`), `aio` (asyncio, on an
`AsyncHandle`), `Executor` (executor.py: jobs as concurrent.futures futures) and
`journal` (every job's events as one stream).  It sits above both the client and
the job data (fluxlite.job: jobspecs, states, eventlogs), which knows no handle."""


def __getattr__(name):
    # imported on use: the CLI never pays for asyncio
    if name == "Executor":
        from .executor import Executor
        return Executor
    raise AttributeError(name)
