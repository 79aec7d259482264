"""A job's environment by Flux's ENV RULES (flux-submit(1): --env, --env-remove,
--env-file): the submitting process's environment with the rules applied in
order, the part of the one option table (options.py) that reads files and
patterns."""

from __future__ import annotations

import fnmatch
import os
import re
import string

from ..errors import UsageError


def job_environment(rules: tuple[str, ...], removes: tuple[str, ...],
                    files: tuple[str, ...] = ()) -> dict[str, str]:
    """The job's environment by Flux's ENV RULES (flux-submit(1)), applied in order to a
    copy of the current one: `-PATTERN` removes, `^FILE` reads more rules from FILE
    (one a line; `~` expands), `VAR=VAL` sets (VAL's $VAR/${VAR} from the environment
    built so far, then the process's; `$$` is `$`), any other rule is a PATTERN whose
    process variables are copied when not set yet.  A PATTERN is a glob, or a regex
    when written /REGEX/ (the last / may be left out)."""
    env = dict(os.environ)
    for pat in removes:
        _apply_env_rule(env, "-" + pat, 0)
    for rule in rules:
        _apply_env_rule(env, rule, 0)
    for path in files:
        _apply_env_rule(env, "^" + path, 0)
    return env


def _env_matcher(pattern: str):
    if pattern.startswith("/"):
        body = pattern[1:-1] if len(pattern) > 1 and pattern.endswith("/") else pattern[1:]
        try:
            rx = re.compile(body)
        except re.error as exc:
            raise UsageError(f"--env: invalid regex {pattern!r}: {exc}") from None
        return lambda k: rx.search(k) is not None
    return lambda k: fnmatch.fnmatchcase(k, pattern)


def _apply_env_rule(env: dict[str, str], rule: str, depth: int) -> None:
    if rule.startswith("-"):
        match = _env_matcher(rule[1:])
        for k in [k for k in env if match(k)]:
            del env[k]
    elif rule.startswith("^"):
        path = os.path.expanduser(rule[1:])
        if depth > 8:
            raise UsageError(f"--env ^{rule[1:]}: rule files include each other too deeply")
        try:
            with open(path) as f:
                lines = f.read().splitlines()
        except OSError as exc:
            raise UsageError.from_oserror(exc, f"--env ^{rule[1:]}: cannot read {path}") from None
        for line in lines:
            line = line.strip()
            if line and not line.startswith("#"):
                _apply_env_rule(env, line, depth + 1)
    elif "=" in rule and not rule.startswith("/"):
        k, _, v = rule.partition("=")
        try:
            env[k] = string.Template(v).substitute({**os.environ, **env})
        except KeyError as exc:
            raise UsageError(f"--env {rule!r}: ${exc.args[0]} is not set") from None
        except ValueError:
            raise UsageError(f"--env {rule!r}: only $VAR and ${{VAR}} expand ($$ is $)") \
                from None
    else:
        match = _env_matcher(rule)
        for k, v in os.environ.items():
            if k not in env and match(k):
                env[k] = v
