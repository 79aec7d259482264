"""Services hosted in a broker: a base class with decorated request handlers
(base.py) and one module per service.  `load_services()` says which run where."""

from __future__ import annotations


def service_classes(rank: int) -> list:
    """The service classes a broker of this rank hosts, in start order."""
    from . import broker_svc, rexec
    classes = [broker_svc.BrokerService, rexec.RexecService]
    if rank == 0:
        from . import job_exec, job_manager, kvs, resource, sched
        classes += [kvs.KVSService, resource.ResourceService, sched.SchedService,
                    job_exec.JobExecService, job_manager.JobManagerService]
    return classes
