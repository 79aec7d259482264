"""Mustache templates as Flux's job shell expands them: `{{tag}}` in --output,
--error and the job's command arguments.

Tags (flux-submit(1) "MUSTACHE TEMPLATES"):
  {{id}} / {{jobid}}          the job id in F58; {{id.f58}}, {{id.f58plain}},
                              {{id.dec}}, {{id.hex}}, {{id.dothex}}, {{id.kvs}}, {{id.words}},
                              {{id.emoji}}
  {{name}}                    the job name (the command's basename by default)
  {{nnodes}}                  nodes (shells) of the job
  {{size}} / {{ntasks}}       tasks of the job
  {{node.id}}, {{node.name}}, {{node.broker_rank}}, {{node.cores}}, {{node.ncores}}
  {{taskid}} / {{task.id}} / {{task.rank}}      the task's global rank
  {{task.index}} / {{task.localid}}             the task's rank on its node
  {{tmpdir}}                  the job's private directory on this node

`render` leaves a tag it has no value for as it is (so `{{script}}`, which the
bootstrap plugin replaces, and text that merely looks like a tag pass through,
as in Flux).  `check` is what submitting commands call on file names: an
unknown tag there is an error, not a literal file name.
"""

from __future__ import annotations

import re

from . import fluid

_TAG = re.compile(r"\{\{([^{}]*)\}\}")

ID_ENCODINGS = ("f58", "f58plain", "dec", "hex", "dothex", "kvs", "words", "emoji")
JOB_TAGS = ("name", "nnodes", "size", "ntasks", "tmpdir")
NODE_TAGS = ("node.id", "node.name", "node.broker_rank", "node.cores", "node.ncores")
TASK_TAGS = ("taskid", "task.id", "task.rank", "task.index", "task.localid")
KNOWN = frozenset(("id", "jobid", *(f"{p}.{e}" for p in ("id", "jobid") for e in ID_ENCODINGS),
                   *JOB_TAGS, *NODE_TAGS, *TASK_TAGS))


def tags(template: str) -> list[str]:
    """The tag names in `template`, in order (`{{ name }}` is `name`)."""
    return [m.group(1).strip() for m in _TAG.finditer(template)]


def check(template: str, where: str) -> None:
    """ValueError naming the first tag of `template` that no job can expand."""
    for tag in tags(template):
        if tag not in KNOWN:
            raise ValueError(f"{where}: unknown mustache template '{{{{{tag}}}}}'")


def per_task(template: str) -> bool:
    """True if `template` expands differently for each task (or node)."""
    return any(t in TASK_TAGS or t in NODE_TAGS for t in tags(template))


def id_forms(jobid: int) -> dict[str, str]:
    f58 = fluid.f58(jobid)
    forms = {"f58": f58, "f58plain": fluid.f58_plain(jobid), "dec": str(jobid),
             "hex": f"0x{jobid:x}", "dothex": fluid.dothex(jobid),
             "kvs": "job." + fluid.dothex(jobid), "words": fluid.words(jobid),
             "emoji": fluid.emoji(jobid)}
    out = {"id": f58, "jobid": f58}
    for enc, val in forms.items():
        out[f"id.{enc}"] = out[f"jobid.{enc}"] = val
    return out


def job_values(jobid: int, *, name: str, nnodes: int, size: int,
               tmpdir: str | None = None) -> dict[str, str]:
    """The values of the job-wide tags."""
    values = id_forms(jobid)
    values.update(name=name, nnodes=str(nnodes), size=str(size), ntasks=str(size))
    if tmpdir:
        values["tmpdir"] = tmpdir
    return values


def node_values(*, node_id: int, name: str, broker_rank: int, cores: str,
                ncores: int) -> dict[str, str]:
    return {"node.id": str(node_id), "node.name": name, "node.broker_rank": str(broker_rank),
            "node.cores": cores, "node.ncores": str(ncores)}


def task_values(rank: int, localid: int) -> dict[str, str]:
    return {"taskid": str(rank), "task.id": str(rank), "task.rank": str(rank),
            "task.index": str(localid), "task.localid": str(localid)}


def render(template: str, values: dict[str, str]) -> str:
    """`template` with every tag in `values` replaced; other tags stay as they are."""
    if "{{" not in template:
        return template

    def sub(m: re.Match) -> str:
        val = values.get(m.group(1).strip())
        return m.group(0) if val is None else val
    return _TAG.sub(sub, template)
