"""ShellInfo (fluxlite/job/shell_info.py): what job-exec tells each job shell, checked
where rexec receives it (through the one dispatcher's `parse`, as rexec.exec's
payload) and carried to the shell as bytes."""

from __future__ import annotations

import pytest

from fluxlite.errors import ProtocolError, UsageError
from fluxlite.job import shell_info, taskmap
from fluxlite.job.shell_info import CriticalRanks, ShellInfo
from fluxlite.protocol.dispatch import parse
from fluxlite.protocol.message import Message
from fluxlite.service.rexec import ExecRequest

pytestmark = pytest.mark.timeout(30)


def info(**over) -> ShellInfo:
    """Shell 1 of a job of three shells (2, 3 and 1 tasks) on broker ranks 0, 2, 5."""
    fields = dict(jobid=1234, userid=1000, shell_rank=1, ranks=[0, 2, 5], counts=[2, 3, 1],
                  taskmap=taskmap.block([2, 3, 1]), service="1000-shell-f2",
                  jobspec={"version": 1, "tasks": [{"command": ["true"]}]},
                  R={"execution": {"R_lite": []}}, cores=[0, 1, 2], gpus=[1],
                  hostname="node2", critical=CriticalRanks(ranks="0-2", seq=0),
                  instance_level=1)
    fields.update(over)
    return ShellInfo(**fields)


def exec_request(payload_info) -> ExecRequest:
    """rexec's view of a `rexec.exec` request carrying `payload_info`."""
    msg = Message.request("rexec.exec", {"kind": "shell", "label": "f2.1",
                                         "info": payload_info})
    return parse(msg, ExecRequest)


def test_what_follows_from_the_fields_is_computed():
    i = info()
    assert (i.nshells, i.ntasks, i.nlocal, i.first_task) == (3, 6, 3, 2)
    assert (i.leader_rank, i.broker_rank) == (0, 2)


def test_job_exec_payload_is_what_rexec_gets():
    i = info()
    assert exec_request(i.as_payload()).info == i


def test_the_shell_decodes_what_rexec_encodes():
    i = info().with_local_uri("local:///tmp/r/local-2", 17)
    back = shell_info.decode(i.encode())
    assert back == i and back.local_uri == "local:///tmp/r/local-2" and back.durable == 17
    assert back.critical.ranks == "0-2" and back.gpus == [1]


@pytest.mark.parametrize("field", ["jobid", "shell_rank", "ranks", "counts", "service",
                                   "jobspec", "cores", "hostname", "critical"])
def test_a_missing_field_is_refused_naming_it(field):
    payload = info().as_payload()
    del payload[field]
    with pytest.raises(ProtocolError, match=rf"rexec.exec: info: .*`{field}`"):
        exec_request(payload)


@pytest.mark.parametrize("field, value, err, words", [
    ("jobid", "1234", ProtocolError, "info.jobid: expected `int`"),
    ("jobid", -1, UsageError, "info.jobid: expected `int` >= 0"),
    ("ranks", [0, "2", 5], ProtocolError, r"info.ranks\[1\]: expected `int`"),
    ("cores", [-1], UsageError, r"info.cores\[0\]"),
    ("critical", {"ranks": 5}, ProtocolError, "info.critical.ranks: expected `str`"),
    ("jobspec", [], ProtocolError, "info.jobspec: expected `object`"),
    ("instance_level", True, ProtocolError, "info.instance_level: expected `int`"),
])
def test_a_field_of_the_wrong_shape_is_refused_naming_it(field, value, err, words):
    payload = dict(info().as_payload(), **{field: value})
    with pytest.raises(err, match=rf"rexec.exec: {words}"):
        exec_request(payload)


@pytest.mark.parametrize("over, words", [
    ({"counts": [2, 3]}, "counts: 2 entries for 3 shells"),
    ({"shell_rank": 3}, "shell_rank: 3 is not below the job's 3 shells"),
    ({"ranks": [0, 2, 2]}, "ranks: a broker rank appears twice"),
    ({"ranks": [], "counts": []}, "ranks: a job has at least one shell"),
    ({"counts": [0, 0, 0]}, "counts: the job has no task"),
])
def test_fields_that_contradict_each_other_are_refused(over, words):
    payload = dict(info().as_payload(), **over)
    with pytest.raises(UsageError, match=rf"rexec.exec: info: {words}"):
        exec_request(payload)
    with pytest.raises(ValueError, match=words):   # nor can job-exec build one
        info(**over)


def test_bytes_that_are_no_shell_info_are_refused():
    with pytest.raises(ValueError, match="shell info: .*missing .*'jobid'"):
        shell_info.decode(b"\x80")   # an empty map
    with pytest.raises(ValueError, match="shell info"):
        shell_info.decode(b"\xc1")


def test_the_shell_reads_it_without_msgspec():
    """A shell reads its record in plain Python: msgspec's code run in a shell would
    be faulted into the memory of every shell (rexec checks the record instead)."""
    import sys
    data = info().encode()
    called = []

    def profile(frame, event, arg):
        if event == "c_call":
            owner = getattr(arg, "__self__", None)
            called.append(f"{getattr(arg, '__module__', None)} "
                          f"{getattr(owner, '__module__', None) or type(owner).__module__}")
    sys.setprofile(profile)
    try:
        back = shell_info.decode(data)
    finally:
        sys.setprofile(None)
    assert back == info() and type(back.critical) is CriticalRanks
    assert called and not [c for c in called if "msgspec" in c], called


def test_the_record_is_immutable():
    with pytest.raises(AttributeError):
        info().jobid = 5
