"""Job states and results, as pure functions of the main eventlog (RFC 21).

    NEW -> DEPEND -> PRIORITY -> SCHED -> RUN -> CLEANUP -> INACTIVE

`validate` enters DEPEND, `depend` PRIORITY, `priority` SCHED, `alloc` RUN;
`finish` or a fatal exception (severity 0) enters CLEANUP (so does `release`
in RUN, when job-exec failed before any finish); `clean` INACTIVE.
The result and the exit code follow Flux: a job that ran with status 0 is
COMPLETED, otherwise a fatal `cancel` is CANCELED, `timeout` TIMEOUT, and
anything else FAILED.
"""

from __future__ import annotations

import os
import signal

NEW, DEPEND, PRIORITY, SCHED, RUN, CLEANUP, INACTIVE = (
    "NEW", "DEPEND", "PRIORITY", "SCHED", "RUN", "CLEANUP", "INACTIVE")
ORDER = (NEW, DEPEND, PRIORITY, SCHED, RUN, CLEANUP, INACTIVE)
ABBREV = {NEW: "N", DEPEND: "D", PRIORITY: "P", SCHED: "S", RUN: "R", CLEANUP: "C",
          INACTIVE: "I"}
PENDING = (DEPEND, PRIORITY, SCHED)
RUNNING = (RUN, CLEANUP)
RESULT_ABBREV = {"COMPLETED": "CD", "FAILED": "F", "CANCELED": "CA", "TIMEOUT": "TO"}
# Flux's jobs fields {state_emoji}, {result_emoji}, {status_emoji} (its `cute` format)
STATE_EMOJI = {NEW: "\U0001f381", DEPEND: "\U0001f6d1", PRIORITY: "\U0001f6a6",
               SCHED: "\U0001f4c5", RUN: "\U0001f3c3", CLEANUP: "\U0001f5d1",
               INACTIVE: "\U0001f480"}
RESULT_EMOJI = {"COMPLETED": ("\U0001f600", ":-)"), "FAILED": ("\U0001f4a9", ":'-("),
                "CANCELED": ("\U0001f4a5", "%-|"), "TIMEOUT": ("\u231b", "(-_-)")}

_ON = {
    "validate": {NEW: DEPEND},
    "depend": {DEPEND: PRIORITY},
    "priority": {PRIORITY: SCHED, SCHED: SCHED},
    "alloc": {SCHED: RUN},
    "finish": {RUN: CLEANUP},
    "release": {RUN: CLEANUP},   # job-exec ended without a finish (it failed)
    "clean": {CLEANUP: INACTIVE},
}


def next_state(state: str, name: str, context: dict | None = None) -> str:
    """State after an eventlog entry (unchanged if the entry does not move the job)."""
    if name == "exception":
        if (context or {}).get("severity", 0) == 0 and state not in (CLEANUP, INACTIVE, NEW):
            return CLEANUP
        return state
    return _ON.get(name, {}).get(state, state)


def result(ran: bool, status: int | None, fatal_type: str | None) -> str:
    if ran and status == 0 and fatal_type is None:
        return "COMPLETED"
    if fatal_type == "cancel":
        return "CANCELED"
    if fatal_type == "timeout":
        return "TIMEOUT"
    return "FAILED"


def exit_code(status: int | None, fatal: bool) -> int:
    """What `run` / `job attach` exit with, from the finish status (a wait status)."""
    if status is None:
        return 1 if fatal else 0
    if os.WIFSIGNALED(status):
        code = 128 + os.WTERMSIG(status)
    else:
        code = os.WEXITSTATUS(status)
    if code == 0 and fatal:
        return 1
    return code


def status_message(status: int) -> str | None:
    """The line `run` prints for a nonzero job: 'task(s) exited with exit code 3'."""
    if os.WIFSIGNALED(status):
        return f"job shell {signal.strsignal(os.WTERMSIG(status)) or 'signaled'}"
    code = os.WEXITSTATUS(status)
    if code > 128:
        try:
            return f"task(s) {signal.strsignal(code - 128)}"
        except ValueError:
            pass
    if code:
        return f"task(s) exited with exit code {code}"
    return None


# submit flags (Flux's values)
WAITABLE = 0x4   # kept, once inactive, until it has been waited for (not purged before)


def emoji(state: str, result: str, active: bool, encoding: str | None) -> dict:
    """{state,result,status}_emoji of a job, as Flux's jobs prints them: the state's
    letter and the result's text face where `encoding` cannot carry the emoji."""
    def shown(face: str, alt: str) -> str:
        try:
            face.encode(encoding or "ascii")
        except (UnicodeEncodeError, LookupError):
            return alt
        return face
    state_e = shown(STATE_EMOJI[state], ABBREV[state])
    result_e = shown(*RESULT_EMOJI.get(result, ("\u3000", "")))
    return {"state_emoji": state_e, "result_emoji": result_e,
            "status_emoji": state_e if active else result_e}
