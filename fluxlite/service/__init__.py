"""Services hosted in a broker: a base class and its small context (base.py) and one
module per service.  Which run on which rank, and with what, is decided in one
place: fluxlite/broker/broker.py (Broker._build_services)."""

MODULES = ("broker_svc", "rexec", "overlay", "kvs", "resource", "sched", "job_exec",
           "job_manager")
