"""Dependencies (flux-core's dependency-after and dependency-singleton plugins):
a new job's RFC 26 dependencies judged from what the table knows of their
targets, and judged again when a target starts or ends."""

from __future__ import annotations

from ...job import actions as act
from ...job import depend, states
from ...job.actions import Job


class Dependencies:
    """Dependency verdicts (a part of JobManagerService)."""

    def _verdict(self, scheme: str, target: Job) -> tuple[str, str]:
        return depend.verdict(scheme, target.id, started=target.ran,
                              inactive=target.state == states.INACTIVE, result=target.result,
                              excepted=target.fatal is not None)

    def _dep(self, userid: int, dep: dict, key: tuple | None) -> act.Dep:
        """An RFC 26 dependency of a new job, judged from what is known of its target
        (a begin-time one is judged by the machine); `key` is (userid, explicit job
        name), or None for a job without one."""
        scheme, desc = dep["scheme"], depend.description(dep)
        if scheme == depend.BEGIN_TIME:
            return act.Dep(desc, scheme, at=float(dep["value"]))
        if scheme == depend.SINGLETON:
            if key is None:
                return act.Dep(desc, scheme, None, depend.NEVER,
                               "dependency: singleton jobs require a job name (--job-name)")
            busy = self._named_active.get(key, 0) > 0
            return act.Dep(desc, scheme, None, depend.WAIT if busy else depend.MET)
        tid = depend.target(dep["value"], scheme)
        target = self.jobs.get(tid)
        if target is None:   # Flux's words (dependency-after)
            return act.Dep(desc, scheme, tid, depend.NEVER,
                           f"dependency: {scheme}: id {dep['value']}: job not found")
        if target.userid != userid:
            return act.Dep(desc, scheme, tid, depend.NEVER,
                           f"dependency: {scheme}: Permission denied for job {dep['value']}")
        return act.Dep(desc, scheme, tid, *self._verdict(scheme, target))

    def _singleton_gone(self, job: Job) -> None:
        """An explicitly named job ended: when every other active job of its user and
        name is a waiting singleton, the first of those may go (dependency-singleton)."""
        key = self._named.pop(job.id, None)
        if key is None:
            return
        left = self._named_active[key] - 1
        if left:
            self._named_active[key] = left
        else:
            del self._named_active[key]
        waiting = self._singletons.get(key)
        if waiting is None:
            return
        if job in waiting:      # a waiting singleton itself ended (canceled)
            waiting.remove(job)
        if waiting and left == len(waiting):
            self._handle_later(waiting.popleft(),
                               act.Verdicts(((depend.SINGLETON, depend.MET, ""),)))
        if not waiting:
            del self._singletons[key]

    def _settle_dependents(self, target: Job) -> None:
        """`target` started or ended: judge again the dependencies naming it."""
        for job in list(target.dependents):
            items = []
            if job.fatal is None and job.state == states.DEPEND:
                items = [(desc, *self._verdict(scheme, target))
                         for desc, (scheme, tid) in job.deps.items() if tid == target.id]
            verdicts = {v for _, v, _ in items}
            if depend.NEVER in verdicts or depend.WAIT not in verdicts:
                target.dependents.remove(job)   # it no longer waits on target
            if items:
                self._handle_later(job, act.Verdicts(tuple(items)))

