"""`flux.job.executor`: FluxExecutor and its future, FluxExecutorFuture."""

from fluxlite.job.executor import JobFuture as FluxExecutorFuture

from . import FluxExecutor

__all__ = ["FluxExecutor", "FluxExecutorFuture"]
