"""The broker lifecycle as a pure state machine.

    join -> init -> quorum -> run -> cleanup -> shutdown -> exit

Events name what happened ("parent-ready", "rc2-success", "parent-fail");
`post()` returns the (old, new) pair the broker logs as "event: old->new",
the way Flux's broker does.  No I/O here: the broker acts on the new state.
"""

from __future__ import annotations

from ..errors import InvalidTransition

JOIN, INIT, QUORUM, RUN, CLEANUP, SHUTDOWN, EXIT = (
    "join", "init", "quorum", "run", "cleanup", "shutdown", "exit")
STATES = (JOIN, INIT, QUORUM, RUN, CLEANUP, SHUTDOWN, EXIT)

_NEXT = {
    JOIN: {"parent-none": INIT, "parent-ready": INIT, "parent-fail": SHUTDOWN,
           "shutdown": SHUTDOWN},
    INIT: {"init-success": QUORUM, "init-fail": SHUTDOWN, "parent-fail": SHUTDOWN,
           "shutdown": SHUTDOWN},
    QUORUM: {"quorum-full": RUN, "quorum-timeout": RUN, "parent-fail": SHUTDOWN,
             "shutdown": CLEANUP},
    RUN: {"rc2-success": CLEANUP, "rc2-fail": CLEANUP, "rc2-none": RUN, "shutdown": CLEANUP,
          "parent-fail": CLEANUP, "signal": CLEANUP},
    CLEANUP: {"cleanup-success": SHUTDOWN, "cleanup-timeout": SHUTDOWN, "parent-fail": SHUTDOWN},
    SHUTDOWN: {"children-complete": EXIT, "children-none": EXIT, "children-timeout": EXIT},
    EXIT: {},
}


class StateMachine:
    def __init__(self, state: str = JOIN):
        self.state = state

    def post(self, event: str) -> tuple[str, str]:
        """Apply `event`; returns (old, new).  Raises InvalidTransition if not allowed."""
        try:
            new = _NEXT[self.state][event]
        except KeyError:
            raise InvalidTransition(f"{event} is not valid in state {self.state}") from None
        old, self.state = self.state, new
        return old, new

    def at_least(self, state: str) -> bool:
        return STATES.index(self.state) >= STATES.index(state)
