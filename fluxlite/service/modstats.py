"""The methods every service answers as a Flux broker module does (modservice):

    NAME.stats-get    its message counters (traffic.py), or the service's own
                      `module_stats()` when it has one, as the counters plus its own keys
    NAME.stats-clear  the counters back to zero (the owner's)
    NAME.rusage       getrusage(2) of the broker process ({"who": "self"|"children"|
                      "thread"}), the fields Flux's rusage answer has
    NAME.debug        {op: setbit|clrbit|set|clr, flags} -> {flags} (the owner's)

`flux module stats/debug NAME` and fluxlite's `module stats/debug` send these.
"""

from __future__ import annotations

import resource

from ..errors import FluxliteError, PermissionDenied, ProtocolError, UsageError
from ..protocol.dispatch import OWNER

METHODS = ("stats-get", "stats-clear", "rusage", "debug")
OWNER_ONLY = ("stats-clear", "debug")
RUSAGE_WHO = {"self": resource.RUSAGE_SELF, "children": resource.RUSAGE_CHILDREN,
              "thread": getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)}
RUSAGE_FIELDS = ("ru_maxrss", "ru_ixrss", "ru_idrss", "ru_isrss", "ru_minflt", "ru_majflt",
                 "ru_nswap", "ru_inblock", "ru_oublock", "ru_msgsnd", "ru_msgrcv",
                 "ru_nsignals", "ru_nvcsw", "ru_nivcsw")


def answer(svc, msg, method: str) -> None:
    """Answer one of METHODS for `svc` (a Service)."""
    try:
        svc.respond(msg, _payload(svc, msg, method))
    except FluxliteError as exc:
        svc.respond_exception(msg, exc)


def _payload(svc, msg, method: str) -> dict:
    if method in OWNER_ONLY and not msg.role & OWNER:
        raise PermissionDenied(f"{msg.topic}: permission denied (only the instance owner "
                               "may call it)")
    body = msg.payload if isinstance(msg.payload, dict) else {}
    if method == "stats-get":
        out = svc.traffic.stats()
        own = getattr(svc, "module_stats", None)
        if callable(own):
            out.update(own())
        return out
    if method == "stats-clear":
        svc.traffic.clear()
        return {}
    if method == "rusage":
        who = body.get("who", "self")
        if not isinstance(who, str) or who not in RUSAGE_WHO:
            raise UsageError(f"{msg.topic}: who must be one of {', '.join(RUSAGE_WHO)}, "
                             f"not {who!r}")
        ru = resource.getrusage(RUSAGE_WHO[who])
        out = {"utime": ru.ru_utime, "stime": ru.ru_stime}
        out.update({f[3:]: getattr(ru, f) for f in RUSAGE_FIELDS})
        return out
    op, flags = body.get("op"), body.get("flags", 0)
    if not isinstance(op, str) or not isinstance(flags, int) or isinstance(flags, bool):
        raise ProtocolError(f"{msg.topic}: expected {{op, flags}}")
    try:
        return {"flags": svc.traffic.debug(op, flags)}
    except ValueError:
        raise ProtocolError(f"{msg.topic}: op must be setbit, clrbit, set or clr, "
                            f"not {op!r}") from None
