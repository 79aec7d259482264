"""`flux.job.list`, as Flux's bindings have it: JobList, job_list, job_list_id."""

from . import JobList, job_list, job_list_id  # noqa: F401

__all__ = ["JobList", "job_list", "job_list_id"]
