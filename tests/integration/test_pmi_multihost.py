"""`fluxlite start` under Hydra across network-namespace hosts: the brokers find they
are on different hosts, link over tcp:// with the CURVE keys they exchanged through
PMI, and the instance runs jobs (and nested instances, and MPI) on both hosts."""

import os
import shutil
import signal
import subprocess

import pytest

from fluxlite.testing import fluxlite_command, missing_prerequisite
from fluxlite.testing import netns as testing_netns
from fluxlite.testing.netns import NetnsHosts
from fluxlite.util import hostlist

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NETNS_EXEC = os.path.join(ROOT, "tests", "programs", "netns-exec")

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def hosts():
    testing_netns.require_root()
    if shutil.which("mpiexec.hydra") is None:
        missing_prerequisite("mpiexec.hydra is not installed (apt-get install mpich)")
    with NetnsHosts(2) as h:
        yield h


def mpiexec_start(hosts, script, n=2, timeout=150, per_host=1, opts=()):
    """`mpiexec.hydra -n N fluxlite start OPTS sh -c SCRIPT`, PER_HOST brokers on each
    namespace host in turn."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PMI_") and k != "FLUXLITE_URI"}
    env["FLUXLITE_TEST_TAG"] = hosts.tag
    p = subprocess.Popen(
        ["mpiexec.hydra", "-launcher", "ssh", "-launcher-exec", NETNS_EXEC,
         "-hosts", ",".join(f"{h}:{per_host}" for h in hosts.names[:n // per_host]),
         "-iface", hosts.bridge, "-n", str(n),
         *fluxlite_command(), "start", *opts, "sh", "-c", script],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        start_new_session=True, env=env, cwd=ROOT)
    try:
        out, err = p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:       # Hydra can hang when a proxy fails: end its session
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def test_hydra_start_across_hosts_links_over_curve_tcp(hosts):
    cp = mpiexec_start(hosts, "fluxlite run -N2 hostname | sort; "
                              "ep=$(fluxlite getattr tbon.endpoint); echo $ep; "
                              'fluxlite getattr broker.pid; ss -Hltnp "sport = :${ep##*:}"; '
                              "exit 4")
    assert cp.returncode == 4, cp.stderr
    lines = cp.stdout.splitlines()
    assert lines[:2] == sorted(hosts.names[:2]), cp.stdout
    assert lines[2].startswith(f"tcp://{hosts[0].address}:"), cp.stdout
    # the listening socket is the broker's alone (its spawner and job shells closed it)
    assert len(lines) == 5 and lines[4].count("pid=") == 1 and f"pid={lines[3]}," in lines[4], \
        cp.stdout


def test_brokers_sharing_a_host_keep_ipc_between_them(hosts):
    # a chain 0-1-2-3 with ranks 0,1 on the first host and 2,3 on the second:
    # only the link 1-2 crosses hosts
    cp = mpiexec_start(hosts, "fluxlite run -N4 hostname | sort; fluxlite getattr "
                              "tbon.endpoint; fluxlite getattr hostlist; "
                              "fluxlite jobs -a -n -o {nodelist}",
                       n=4, per_host=2, opts=["--topo", "kary:1"])
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    assert lines[:4] == sorted(hosts.names[:1] * 2 + hosts.names[1:2] * 2), cp.stdout
    assert lines[4].startswith("ipc://"), cp.stdout
    # the PMI exchange gave every broker everybody's host: the hostlist attribute
    placed = hostlist.encode(hosts.names[:1] * 2 + hosts.names[1:2] * 2)
    assert lines[5:] == [placed, placed], cp.stdout


def test_batch_inside_nests_across_the_hosts(hosts, tmp_path):
    out = tmp_path / "batch.out"
    cp = mpiexec_start(hosts, f'id=$(fluxlite batch -N2 --output {out} --wrap '
                              f'"fluxlite run -N2 hostname | sort; '
                              f'fluxlite getattr tbon.endpoint") && fluxlite job wait "$id"')
    assert cp.returncode == 0, cp.stderr
    lines = out.read_text().splitlines()
    assert lines[:2] == sorted(hosts.names[:2]), lines
    # the child's rank 0 (on one host) listens on TCP for its rank 1 (on the other)
    assert lines[2].startswith("tcp://") and lines[2].split("//")[1].split(":")[0] in \
        {h.address for h in hosts}, lines


@pytest.fixture(scope="module")
def mpi_hello(tmp_path_factory):
    mpicc = shutil.which("mpicc.mpich")
    if mpicc is None:
        missing_prerequisite("mpicc.mpich not found: install mpich libmpich-dev to run the "
                             "MPI tests")
    path = str(tmp_path_factory.mktemp("mpi") / "mpi_hello")
    subprocess.run([mpicc, "-o", path, os.path.join(ROOT, "tests", "programs", "mpi_hello.c")],
                   check=True, timeout=120)
    return path


def test_mpi_job_spans_the_hosts(hosts, mpi_hello):
    cp = mpiexec_start(hosts, f"fluxlite run -N2 -n4 {mpi_hello}")
    assert cp.returncode == 0, cp.stderr
    assert sorted(line for line in cp.stdout.splitlines() if line.startswith("rank ")) == \
        [f"rank {r} of 4" for r in range(4)], cp.stdout
