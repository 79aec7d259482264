"""Tables from event types to the methods that handle them, checked when built.

A pure state machine (job/actions.py, job/execution.py) takes typed events and
hands each to one method.  The table says which, in so many words, and is checked
at import: every event type (each subclass of the machine's event base) has a
handler, every handler is a method of the machine named for its event, and no
`_on_` method of the machine is left out.  A missing or misspelled handler is an
import error, not a job stuck at run time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

PREFIX = "_on_"


def _event_types(base: type) -> set[type]:
    out, todo = set(), list(base.__subclasses__())
    while todo:
        cls = todo.pop()
        out.add(cls)
        todo.extend(cls.__subclasses__())
    return out


def handler_table(machine: type, base: type,
                  handlers: Mapping[type, Callable]) -> dict[type, Callable]:
    """Check `handlers` ({event type: machine method}) against the subclasses of
    `base` and the `_on_` methods of `machine`; returns it as a dict.  A table that
    does not match raises TypeError (a programming error, found at import)."""
    problems = []
    events = _event_types(base)
    for ev in sorted(events - handlers.keys(), key=lambda c: c.__name__):
        problems.append(f"no handler for {ev.__name__} (add {PREFIX}{ev.__name__})")
    for ev in sorted(handlers.keys() - events, key=lambda c: getattr(c, "__name__", str(c))):
        problems.append(f"{getattr(ev, '__name__', ev)!s} is no subclass of {base.__name__}")
    for ev, fn in handlers.items():
        name = getattr(fn, "__name__", repr(fn))
        if machine.__dict__.get(name) is not fn:
            problems.append(f"{name} is not a method of {machine.__name__}")
        elif name != PREFIX + getattr(ev, "__name__", ""):
            problems.append(f"{name} handles {getattr(ev, '__name__', ev)!s}: "
                            f"name it {PREFIX}{getattr(ev, '__name__', ev)!s}")
    listed = {getattr(fn, "__name__", None) for fn in handlers.values()}
    for name in sorted(n for n in machine.__dict__ if n.startswith(PREFIX)):
        if name not in listed:
            problems.append(f"{machine.__name__}.{name} is in no handler table")
    if problems:
        raise TypeError(f"{machine.__name__}'s handler table: " + "; ".join(problems))
    return dict(handlers)
