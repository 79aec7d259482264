"""The pure parts of the pmix plugin: the maps OpenPMIx is given, each shell's host
from R, and the -o pmi=LIST parser."""

import pytest

from fluxlite.job import taskmap
from fluxlite.job.shell_info import CriticalRanks, ShellInfo
from fluxlite.job.shell_options import pmi_list
from fluxlite.pmi.pmix import node_names, proc_map
from fluxlite.shell.plugins.pmix import job_hosts


def test_proc_map_lists_each_nodes_ranks_in_block_order():
    assert proc_map([2, 2]) == "0,1;2,3"
    assert proc_map([3, 1, 2]) == "0,1,2;3;4,5"
    assert proc_map([1]) == "0"


def test_node_names_are_made_distinct_only_when_hosts_repeat():
    assert node_names(["a", "b"]) == ["a", "b"]
    assert node_names(["vm", "vm", "vm"]) == ["vm0", "vm1", "vm2"]


def _info(R: dict, ranks: list[int], hostname: str) -> ShellInfo:
    return ShellInfo(jobid=1, userid=1, shell_rank=0, ranks=ranks, counts=[1] * len(ranks),
                     taskmap=taskmap.block([1] * len(ranks)), service="1-shell-x",
                     jobspec={}, R=R, cores=[0], hostname=hostname,
                     critical=CriticalRanks(ranks="0"))


def test_job_hosts_follow_shell_order_from_rs_nodelist():
    info = _info({"execution": {"nodelist": ["h[0-1]", "x"]}}, [3, 0, 1], "h1")
    # R names ranks in order (0 -> h0, 1 -> h1, 3 -> x); shell 0 runs on rank 3
    assert job_hosts(info) == ["x", "h0", "h1"]


def test_job_hosts_without_a_nodelist_name_every_shell_after_this_one():
    assert job_hosts(_info({}, [0, 1], "vm")) == ["vm", "vm"]


@pytest.mark.parametrize("value, want", [
    (None, None), ("simple", ["simple"]), ("pmix", ["pmix"]),
    ("simple,pmix", ["simple", "pmix"]), ("pmix,simple,pmix", ["pmix", "simple"]),
    (["pmix", "simple"], ["pmix", "simple"]), ("off", []), ("none", []),
])
def test_pmi_list_accepts_fluxs_names(value, want):
    assert pmi_list(value) == want


@pytest.mark.parametrize("value", ["bogus", "simple,bogus", "off,pmix", "", "simple,", 1])
def test_pmi_list_refuses_anything_else(value):
    with pytest.raises(ValueError):
        pmi_list(value)
