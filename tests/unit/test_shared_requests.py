"""Shapes and computations that exist once: the request payloads several services
share are declared in protocol/schema.py alone, and the PMI process mapping is the
job's RFC 34 taskmap (job/taskmap.py) written in MPICH's words."""

import ast
import pathlib

import pytest

import fluxlite
from fluxlite.job import taskmap
from fluxlite.protocol import schema
from fluxlite.service import job_exec, sched
from fluxlite.service.job_manager import control, listing

pytestmark = pytest.mark.timeout(30)

PKG = pathlib.Path(fluxlite.__file__).parent
SHARED = ("JobRequest", "KillRequest")


def test_shared_requests_are_declared_once():
    found = []
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and node.name in SHARED:
                found.append(f"{path.relative_to(PKG).as_posix()}:{node.name}")
    assert sorted(found) == ["protocol/schema.py:JobRequest", "protocol/schema.py:KillRequest"]


def test_services_use_the_shared_requests():
    assert listing.JobRequest is job_exec.JobRequest is sched.JobRequest is schema.JobRequest
    assert control.KillRequest is job_exec.KillRequest is schema.KillRequest


@pytest.mark.parametrize("counts, mapping", [
    ([2, 2], "(vector,(0,2,2))"),
    ([4], "(vector,(0,1,4))"),
    ([3, 3, 1], "(vector,(0,2,3),(2,1,1))"),
    ([1, 2, 2, 1, 1], "(vector,(0,1,1),(1,2,2),(3,2,1))"),
    ([0, 2], "(vector,(0,1,0),(1,1,2))"),
])
def test_process_mapping_is_the_taskmap(counts, mapping):
    assert taskmap.pmi_mapping(taskmap.block(counts)) == mapping
    blocks = taskmap.block(counts)["map"]
    assert all(repeat == 1 for *_, repeat in blocks)
    assert mapping == "(vector," + ",".join(f"({a},{b},{c})" for a, b, c, _ in blocks) + ")"
