"""The KVS root, as Flux's kvs module shows it (a part of KVSService):

- `kvs.getroot` {namespace?} -> {rootref, rootseq, owner, flags, namespace}: the
  root of a namespace now.  fluxlite's KVS has no content store, so the root is
  not named by a blobref: `rootref` names the version it is at, as a
  checkpoint's rootref does ("primary:kvs-version-7").  `rootseq` is that
  version: one count for every namespace (`kvs version`), which every commit
  moves on.
- `kvs.wait-version` {rootseq, namespace?} -> {rootseq}: answered once the KVS
  has reached that version (at once if it has), by a commit or a namespace made
  or removed (each is a version); the caller's disconnect drops the wait.

A job's guest namespace (Flux's `job-ID`, the name `job namespace ID` prints)
is the job's `guest` directory of the primary namespace, where its exec
eventlog, output and input are (`kvs get -N job-ID exec.eventlog` reads
job.<path>.guest.exec.eventlog): lookups, watches and commits naming it are
taken there, for the job's owner and the instance owner; a link made in it to
a key of it leads within it.  A namespace created
under that name (`kvs namespace create job-1`) is that namespace instead.
"""

from __future__ import annotations

import re
from typing import Annotated

from ..errors import FluxliteError, NotSupported, PermissionDenied
from ..job.eventlog import job_key
from ..protocol.schema import Meta, Struct
from .base import ANY, handler
from .kvs_tree import PRIMARY

GUEST = re.compile(r"job-([0-9]{1,20})")   # (fullmatch: no "job-1\n")


Namespace = Annotated[str, Meta(max_length=255)]


class GetrootRequest(Struct, kw_only=True):
    namespace: Namespace | None = None


class WaitVersionRequest(Struct, kw_only=True):
    rootseq: Annotated[int, Meta(ge=0, le=2 ** 63 - 1)]
    namespace: Namespace | None = None


def rootref(namespace: str, version: int) -> str:
    return f"{namespace}:kvs-version-{version}"


class KVSRoot:
    """getroot and wait-version; commits wake the waits."""

    version_waits: list   # [(rootseq, msg)] not reached yet

    @handler("kvs.getroot", schema=GetrootRequest, roles=ANY)
    def getroot(self, msg, req):
        ns, info = self._root_ns(msg, req.namespace)
        return {"rootref": rootref(ns, self.version), "rootseq": self.version,
                "owner": info.get("owner", self.ctx.owner), "flags": info.get("flags", 0),
                "namespace": ns}

    @handler("kvs.wait-version", schema=WaitVersionRequest, roles=ANY)
    def wait_version(self, msg, req):
        self._root_ns(msg, req.namespace)
        if self.version >= req.rootseq:
            return {"rootseq": self.version}
        entry = (req.rootseq, msg)
        self.version_waits.append(entry)
        self.track_stream(msg, lambda: self._drop_wait(entry))
        return self.no_reply

    def _root_ns(self, msg, namespace: str | None) -> tuple[str, dict]:
        """The namespace a getroot or wait-version names, checked, and its {owner,
        flags}: a job's guest namespace is its owner's, at the KVS's version."""
        if self.guest_prefix(msg, namespace) is not None:
            return namespace, {"owner": self._job_owner(namespace)}
        ns, _ = self._ns(msg, namespace)
        return ns, self.ns_info.get(ns, {})

    def _drop_wait(self, entry) -> None:
        if entry in self.version_waits:
            self.version_waits.remove(entry)

    def guest_prefix(self, msg, namespace: str | None) -> str | None:
        """The primary-namespace directory a guest namespace `job-ID` stands for (None
        for any other name); ENOTSUP for a job that is not there, EPERM for a user
        who owns neither the job nor the instance."""
        m = GUEST.fullmatch(namespace or "")
        if m is None or namespace in self.roots:
            return None
        owner = self._job_owner(namespace)
        if msg is not None and not self.is_owner(msg) and msg.userid != owner:
            raise PermissionDenied(f"KVS namespace {namespace!r}: only the job's owner or "
                                   "the instance owner may use it")
        return job_key(int(m.group(1)), "guest")

    def _job_owner(self, namespace: str):
        """The userid of the job a guest namespace `job-ID` names; ENOTSUP if there is
        no such job."""
        jobid = int(namespace[4:])
        try:
            first = self.lookup(job_key(jobid, "eventlog"))[0]
        except (FluxliteError, IndexError, TypeError, ValueError):   # (not a job id)
            raise NotSupported(f"KVS namespace {namespace!r} does not exist (no job "
                               f"{jobid} in this instance)") from None
        return (first.get("context") or {}).get("userid") if isinstance(first, dict) \
            else None

    def in_guest(self, msg, req) -> str | None:
        """Take a request naming a guest namespace to its directory (its key, its ops'
        keys, and the targets of the links it makes in it, under it); the directory
        if it did (a link in a guest namespace leads within it, as in Flux's)."""
        prefix = self.guest_prefix(msg, req.namespace)
        if prefix is None:
            return None
        req.namespace = None
        if hasattr(req, "key"):
            req.key = _under(prefix, req.key)
        for op in getattr(req, "ops", ()):
            if not isinstance(op, dict) or not isinstance(op.get("key"), str):
                continue
            op["key"] = _under(prefix, op["key"])
            _link_under(prefix, op)
        return prefix

    @staticmethod
    def from_guest(prefix: str, answer: dict) -> dict:
        """A lookup's answer in a guest namespace: a link's target as it was written
        there (in_guest put it under the directory)."""
        val = answer.get("val")
        if isinstance(val, dict) and val.get("type") == "symlink":
            data = val["data"]
            if "namespace" not in data and data["target"].startswith(prefix + "."):
                val["data"] = {**data, "target": data["target"][len(prefix) + 1:]}
        return answer

    def module_stats(self) -> dict:
        """What `module stats kvs` adds to the message counters: per namespace, its
        store revision and the wait-version requests waiting, as Flux's kvs does."""
        waiting = len(self.version_waits)
        return {"namespace": {ns: {"#versionwaiters": waiting if ns == PRIMARY else 0,
                                   "store revision": self.version}
                              for ns in self.roots},
                "watchers": sum(len(w) for w in self.watchers.values())}

    def commit(self, ops: list[dict], namespace: str = PRIMARY) -> int:
        version = super().commit(ops, namespace)
        self.version_reached(version)
        return version

    def version_reached(self, version: int) -> None:
        """The KVS is at `version` (a commit, or a namespace made or removed): answer
        the waits it reached."""
        if self.version_waits:
            reached = [w for w in self.version_waits if w[0] <= version]
            self.version_waits = [w for w in self.version_waits if w[0] > version]
            for _, msg in reached:
                self.untrack_stream(msg)
                self.respond(msg, {"rootseq": version})


def _link_under(prefix: str, op: dict) -> None:
    """A link made in a guest namespace, to a key of that namespace (no namespace
    named), leads to that key under the guest directory."""
    dirent = op.get("dirent")
    if isinstance(dirent, dict):      # Flux's form: {key, flags, dirent}
        data = dirent.get("data")
        if (dirent.get("type") == "symlink" and isinstance(data, dict)
                and data.get("namespace") is None and isinstance(data.get("target"), str)):
            dirent["data"] = {**data, "target": _under(prefix, data["target"])}
    elif isinstance(op.get("symlink"), str) and op.get("target_namespace") is None:
        op["symlink"] = _under(prefix, op["symlink"])


def _under(prefix: str, key: str) -> str:
    key = key.strip(".")
    return f"{prefix}.{key}" if key else prefix
