"""The options of `fluxlite` itself, flux(1)'s: -p/--parent and -r/--root run a
command in the enclosing instance, the one whose `parent-uri` attribute names it,
with the KVS namespace that instance gave the job (`parent-kvs-namespace`, Flux's);
at the top there is no parent and the command runs where it is, as Flux's does.
-v/--verbose prints the environment the command is given first, -V/--version runs
`version`.  Through the real CLI, in real nested instances."""

from __future__ import annotations

import pytest

from fluxlite.job.eventlog import job_key

pytestmark = pytest.mark.timeout(240)

# what an instance two levels down sees of the instances above it
INNER = ("echo inner=$(fluxlite -p getattr instance-level)"
         ",$(fluxlite -r getattr instance-level)"
         ",$(fluxlite -p -p getattr instance-level)"
         ",$(fluxlite --parent --parent --parent getattr instance-level)")

OUTER = ("echo ns=$(fluxlite getattr parent-kvs-namespace) && "
         "echo up=$(fluxlite -p getattr instance-level),$(fluxlite -r getattr instance-level)"
         ",$(fluxlite -p -p getattr instance-level) && "
         "echo env=$(fluxlite -p env printenv FLUXLITE_KVS_NAMESPACE) && "
         "echo verbose=$(fluxlite -p -v getattr instance-level | tr '\\n' ,) && "
         "fluxlite -p kvs put note=from-the-child && "
         "fluxlite kvs put note=in-the-child && "
         f"fluxlite alloc -N1 sh -c '{INNER}'")


def test_parent_and_root_reach_the_enclosing_instances(inst1):
    cp = inst1.cli("alloc", "-N1", "sh", "-c", OUTER, check=True, timeout=200)
    got = dict(line.split("=", 1) for line in cp.stdout.split())
    assert got["ns"].startswith("job-"), cp.stdout
    jobid = int(got["ns"][len("job-"):])
    # level 1: -p and -r both reach the top (level 0), and a second -p stays there
    assert got["up"] == "0,0,0"
    # -p names the parent's namespace for the job (what FLUXLITE_KVS_NAMESPACE was)
    assert got["env"] == got["ns"]
    assert got["verbose"] == (f"FLUXLITE_URI={inst1.getattr('local-uri')},"
                              f"FLUXLITE_KVS_NAMESPACE={got['ns']},0,")
    assert inst1.cli("kvs", "get", job_key(jobid, "guest", "note"),
                     check=True).stdout == "from-the-child\n"
    # level 2: -p is level 1, -r and -p -p level 0, and more -p than levels stop there
    assert got["inner"] == "1,0,0,0"


def test_at_the_top_there_is_no_parent(inst1):
    cp = inst1.cli("getattr", "parent-uri")
    assert (cp.returncode, cp.stderr) == (
        1, "fluxlite getattr: parent-uri: No such file or directory (the attribute is "
           "not set in this instance)\n")
    assert inst1.cli("getattr", "parent-kvs-namespace").returncode == 1
    # as Flux: -p and -r at the root leave the command where it is
    for opts in (["-p"], ["-r"], ["-p", "-p", "-r"]):
        cp = inst1.cli(*opts, "getattr", "instance-level", check=True)
        assert cp.stdout == "0\n", opts
    inst1.cli("-p", "kvs", "put", "here=1", check=True)
    assert inst1.cli("kvs", "get", "here", check=True).stdout == "1\n"


def test_verbose_and_version(inst1):
    cp = inst1.cli("-v", "getattr", "size", check=True)
    assert cp.stdout == f"FLUXLITE_URI={inst1.uri}\n1\n"
    version = inst1.cli("version", check=True).stdout
    assert version.startswith("commands:")
    for opt in ("-V", "--version"):
        assert inst1.cli(opt, check=True).stdout == version
