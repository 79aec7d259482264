"""ShellInfo: what job-exec tells each job shell, as one typed, checked record.

job-exec builds one per shell (service/job_exec.py) and sends it in `rexec.exec`
to that shell's broker.  rexec's dispatcher converts the payload to this record,
so a missing field or one of the wrong type is refused with a message naming it
("rexec.exec: info.jobid: ..."), and `__post_init__` refuses fields that
contradict each other.  rexec adds the one fact only the broker knows (its local
URI, `with_local_uri`) and hands the record to the spawner as bytes in the wire
codec (`encode`), which the spawner passes to the forked shell unread; the shell
decodes it once (`decode`) and reads typed fields.  Nothing else travels: what
follows from these fields (the number of shells and tasks, the leader's rank,
this shell's first task, the eventlog keys) is computed, never sent.

The job's private directory on the node is not here: the spawner makes it for the
shell and gives it its path beside this record (shell/main.py).
"""

from __future__ import annotations

import dataclasses
from typing import Annotated

import msgspec

from ..protocol.message import pack, unpack
from ..protocol.schema import AnyMap, Idset, JobId, Name, Rank, Seq, Text, UserId

TaskCount = Annotated[int, msgspec.Meta(ge=0, le=1 << 24)]
ResourceId = Annotated[int, msgspec.Meta(ge=0, le=1 << 24)]   # a core's or GPU's id in R
Level = Annotated[int, msgspec.Meta(ge=0, le=1 << 10)]

# Plain frozen dataclasses, which msgspec checks (rexec's dispatcher converts its
# payload to them, bounds and all) but which a shell builds in plain Python: msgspec's
# code run in a shell would be faulted into every shell's memory
_record = dataclasses.dataclass(frozen=True, slots=True, kw_only=True)


@_record
class CriticalRanks:
    """The job's critical shell ranks when the shell starts (job-exec's current set)."""
    ranks: Idset
    seq: Seq = 0


@_record
class ShellInfo:
    """One job shell's start-up information (the fields are facts of the job and of
    this shell; the properties below follow from them)."""
    jobid: JobId
    userid: UserId
    shell_rank: Rank               # this shell's index among the job's shells
    ranks: list[Rank]              # the broker rank of each shell, in shell order
    counts: list[TaskCount]        # the number of tasks of each shell, in shell order
    taskmap: AnyMap                # the job's task map (job/taskmap.py)
    service: Name                  # the job's shell service, "<userid>-shell-<f58 id>"
    jobspec: AnyMap                # the job's jobspec, as submitted
    R: AnyMap                      # the job's resource set
    cores: list[ResourceId]        # this shell's cores (ids on its node)
    gpus: list[ResourceId] = dataclasses.field(default_factory=list)  # ... and GPUs
    hostname: Text                 # the host of this shell's broker
    critical: CriticalRanks
    instance_level: Level = 0      # the depth of the instance running the job (0: system)
    local_uri: Text = ""           # the shell's own broker, set by rexec there
    durable: Seq = 0               # ... and the state directory's write-out the job's alloc
    #                                is in: the shell's tasks wait for it (0: none)

    def __post_init__(self) -> None:
        n = len(self.ranks)
        if n == 0:
            raise ValueError("ranks: a job has at least one shell")
        if len(self.counts) != n:
            raise ValueError(f"counts: {len(self.counts)} entries for {n} shells")
        if self.shell_rank >= n:
            raise ValueError(f"shell_rank: {self.shell_rank} is not below the job's "
                             f"{n} shells")
        if len(set(self.ranks)) != n:
            raise ValueError("ranks: a broker rank appears twice")
        if not any(self.counts):
            raise ValueError("counts: the job has no task")

    # ------------------------------------------------------ what follows
    @property
    def nshells(self) -> int:
        return len(self.ranks)

    @property
    def ntasks(self) -> int:
        return sum(self.counts)

    @property
    def nlocal(self) -> int:
        """The number of this shell's tasks."""
        return self.counts[self.shell_rank]

    @property
    def first_task(self) -> int:
        """The global rank of this shell's first task in a block task map."""
        return sum(self.counts[:self.shell_rank])

    @property
    def leader_rank(self) -> int:
        """The broker rank of shell 0, which serves the job's shell service."""
        return self.ranks[0]

    @property
    def broker_rank(self) -> int:
        """The broker rank this shell runs on."""
        return self.ranks[self.shell_rank]

    # ---------------------------------------------------------- the wire
    def as_payload(self) -> dict:
        """The record as plain values, for a message (shallow: the jobspec and R are
        not copied)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["critical"] = {"ranks": self.critical.ranks, "seq": self.critical.seq}
        return out

    def with_local_uri(self, uri: str, durable: int = 0) -> ShellInfo:
        return dataclasses.replace(self, local_uri=uri, durable=durable)

    def encode(self) -> bytes:
        """The record in the wire codec, as the spawner carries it to the shell."""
        return pack(self.as_payload())


def decode(data: bytes) -> ShellInfo:
    """The record a shell was started with, as rexec encoded it (checked there): read
    in plain Python.  ValueError if it is not one."""
    try:
        fields = unpack(data)
        if not isinstance(fields, dict):
            raise TypeError("not a map")
        if isinstance(fields.get("critical"), dict):
            fields["critical"] = CriticalRanks(**fields["critical"])
        return ShellInfo(**fields)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"shell info: {exc}") from None
