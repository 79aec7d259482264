"""A job's tasks work in its guest KVS namespace, as Flux's: the shell sets
FLUXLITE_KVS_NAMESPACE (and FLUX_KVS_NAMESPACE under Flux compatibility) to
job-ID, and `kvs` commands and the `flux.kvs` package default to it where no
namespace is named; a nested instance's initial program works in that
instance's primary namespace."""

import sys

from fluxlite.job.eventlog import job_key
from fluxlite.util.compat import enable


def _ns_id(line: str) -> int:
    assert line.startswith("job-"), line
    return int(line[len("job-"):])


def test_a_tasks_kvs_put_lands_in_its_jobs_guest_namespace(inst1):
    cp = inst1.cli("run", "sh", "-c",
                   'echo "$FLUXLITE_KVS_NAMESPACE ${FLUX_KVS_NAMESPACE-unset}" && '
                   "fluxlite kvs put a=1 && fluxlite kvs get a && "
                   "fluxlite kvs put -N primary b=2", check=True)
    ns, flux_ns, got = cp.stdout.split()
    jobid = _ns_id(ns)
    assert (flux_ns, got) == ("unset", "1")   # FLUX_* only with compatibility on
    # not in the primary namespace, but in the job's guest directory, where Flux
    # copies the guest namespace when the job ends
    missing = inst1.cli("kvs", "get", "a")
    assert missing.returncode == 1 and "a: No such file or directory" in missing.stderr
    guest = inst1.cli("kvs", "get", job_key(jobid, "guest", "a"), check=True)
    assert guest.stdout == "1\n"
    # fluxlite keeps the guest namespace as long as the job's directory
    assert inst1.cli("kvs", "get", "-N", ns, "a", check=True).stdout == "1\n"
    # -N names the namespace over the environment's
    assert inst1.cli("kvs", "get", "b", check=True).stdout == "2\n"
    # a submitted job's namespace is its own, not its submitter's
    cp = inst1.cli("run", "sh", "-c", "fluxlite run printenv FLUXLITE_KVS_NAMESPACE",
                   check=True)
    assert _ns_id(cp.stdout.strip()) != jobid


FLUX_KVS_TASK = r'''
import os, flux, flux.job, flux.kvs
h = flux.Flux()
flux.kvs.put(h, "c", 3)
flux.kvs.commit(h)
d = flux.job.job_kvs_guest(h, flux.job.JobID(os.environ["FLUX_JOB_ID"]))
print(os.environ["FLUX_KVS_NAMESPACE"], flux.kvs.get(h, "c"), d["c"])
'''


def test_the_flux_package_in_a_job_works_in_its_guest_namespace(inst1):
    env = {}
    enable(env)
    env["PYTHONPATH"] = env["PYTHONPATH"].rstrip(":")
    cp = inst1.cli("run", sys.executable, "-c", FLUX_KVS_TASK, env=env, check=True)
    ns, got, in_guest_dir = cp.stdout.split()
    assert (got, in_guest_dir) == ("3", "3")
    jobid = _ns_id(ns)
    assert inst1.cli("kvs", "get", job_key(jobid, "guest", "c"), check=True).stdout == "3\n"
    assert inst1.cli("kvs", "get", "c").returncode == 1


def test_an_allocs_commands_work_in_its_own_primary_namespace(inst1):
    cp = inst1.cli("alloc", "-N1", "sh", "-c",
                   'echo "${FLUXLITE_KVS_NAMESPACE-unset}" && fluxlite kvs put d=4 && '
                   "fluxlite kvs get -N primary d", timeout=110)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.split() == ["unset", "4"]
    assert inst1.cli("kvs", "get", "d").returncode == 1   # not the enclosing instance's
