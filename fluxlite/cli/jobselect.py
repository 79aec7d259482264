"""Which jobs `fluxlite jobs` (and pstree, pgrep, pkill) list: the -f state and
result words, -u users, --since times, -i hosts or ranks, and the one test of a
job against all of the listing options (`selected`)."""

from __future__ import annotations

import datetime
import os
import pwd

import click

from ..errors import UsageError
from ..job import states as st
from ..util import hostlist, idset

# -f words: groups of states, single states, or results
FILTER_GROUPS = {"pending": set(st.PENDING), "running": set(st.RUNNING),
                 "active": set(st.ORDER) - {st.INACTIVE}, "inactive": {st.INACTIVE}}
FILTER_WORDS = list(dict.fromkeys(sorted(FILTER_GROUPS) + [s.lower() for s in st.ORDER] +
                                  [r.lower() for r in st.RESULT_ABBREV]))


def filter_option(ctx, param, value):
    if value is None:
        return None
    words = [w.strip().lower() for w in value.split(",") if w.strip()]
    bad = [w for w in words if w not in FILTER_WORDS]
    if bad or not words:
        raise click.BadParameter(f"invalid state or result {','.join(bad) or value!r}; "
                                 f"expected some of {','.join(FILTER_WORDS)}")
    return words


def user_option(ctx, param, value):
    """-u USER: a user name or uid, or `all`; None: everyone's jobs."""
    if value is None:
        return os.getuid()
    if value == "all":
        return None
    if value.isdigit():
        return int(value)
    try:
        return pwd.getpwnam(value).pw_uid
    except KeyError:
        raise click.BadParameter(f"unknown user {value!r}") from None


def since_option(ctx, param, value):
    """--since WHEN: seconds since the epoch; -FSD counts back from now."""
    if value is None:
        return None
    import time

    from ..job.depend import parse_phrase
    from ..util import fsd
    text = value.strip()
    try:
        if text.startswith("-"):
            return time.time() - fsd.parse(text[1:])
        try:
            when = datetime.datetime.fromisoformat(text).timestamp()
        except ValueError:
            when = parse_phrase(text)
        if when is None:
            raise ValueError(text)
    except ValueError:
        raise click.BadParameter(f"invalid datetime {value!r}: expected -FSD (e.g. -1h) or "
                                 "a date and time such as '2026-12-01 10:00'") from None
    if when > time.time():  # as Flux's: a time in the past
        raise UsageError(f"--since={value} appears to be in the future")
    return when


def include_ranks(text: str, hosts: list[str]) -> set[int]:
    """-i HOSTS|RANKS: the broker ranks named by an idset or a hostlist."""
    try:
        return idset.decode(text)
    except ValueError:
        pass
    try:
        names = set(hostlist.decode(text))
    except ValueError:
        raise click.BadParameter(f"{text!r} is neither an idset of ranks nor a hostlist",
                                 param_hint="--include") from None
    return {r for r, h in enumerate(hosts) if h in names}


def matches(job: dict, words: list[str]) -> bool:
    for w in words:
        if job["state"] in FILTER_GROUPS.get(w, ()) or job["state"] == w.upper():
            return True
        if job.get("result") == w.upper():
            return True
    return False


def selected(job: dict, params: dict, hosts: list[str]) -> bool:
    """Whether `job` passes -f, --instances, -q, --name, --since and -i."""
    if params["words"] and not matches(job, params["words"]):
        return False
    if params["instances"] and not job.get("instance"):
        return False
    if params["queues"] is not None and (job.get("queue") or "") not in \
            {q.strip() for q in params["queues"].split(",")}:
        return False
    if params["name"] is not None and job.get("name") != params["name"]:
        return False
    if params["since"] is not None and job["state"] == st.INACTIVE and \
            (job.get("t_inactive") or 0.0) <= params["since"]:
        return False
    if params["include"] is not None:
        return bool(include_ranks(params["include"], hosts) &
                    idset.decode(job.get("ranks") or ""))
    return True
