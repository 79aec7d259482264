"""The `job-manager` service (rank 0), one concern a module (service.py lists them)."""

from .service import JobManagerService

__all__ = ["JobManagerService"]
