"""`hostlist` without SOURCES reads stdin, as flux-hostlist(1): an empty stdin is an
empty list (nothing printed, exit 0); a stdin that never speaks fails after
FLUX_HOSTLIST_STDIN_TIMEOUT seconds (Flux's variable, default 15); a closed stdin
is one line and exit 1, not a traceback."""

from __future__ import annotations

import subprocess

import pytest

from fluxlite.testing import fluxlite_command

pytestmark = pytest.mark.timeout(120)


def hostlist(inst, *args, env=None, **kw) -> subprocess.CompletedProcess:
    e = dict(inst.env, **(env or {}))
    return subprocess.run(fluxlite_command() + ["hostlist", *args], env=e, text=True,
                          capture_output=True, timeout=60, **kw)


def test_stdin_is_the_default_source(inst1):
    assert hostlist(inst1, "-e", input="n[1-2]\nn3\n").stdout == "n1 n2 n3\n"
    cp = hostlist(inst1, stdin=subprocess.DEVNULL)
    assert (cp.returncode, cp.stdout, cp.stderr) == (0, "", "")


def test_a_silent_stdin_times_out_as_flux_s_variable_says(inst1):
    with subprocess.Popen(["sleep", "60"], stdout=subprocess.PIPE) as silent:
        try:
            cp = hostlist(inst1, env={"FLUX_HOSTLIST_STDIN_TIMEOUT": "0.2"},
                          stdin=silent.stdout)
        finally:
            silent.kill()
    assert (cp.returncode, cp.stdout) == (1, "")
    assert cp.stderr == "fluxlite hostlist: timeout after 0.2s waiting for stdin\n"
    cp = hostlist(inst1, env={"FLUX_HOSTLIST_STDIN_TIMEOUT": "soon"},
                  stdin=subprocess.DEVNULL)
    assert cp.returncode == 1 and len(cp.stderr.splitlines()) == 1
    assert "FLUX_HOSTLIST_STDIN_TIMEOUT" in cp.stderr


def test_a_closed_stdin_is_one_line(inst1):
    cp = subprocess.run(["sh", "-c", '"$@" <&-', "sh", *fluxlite_command(), "hostlist"],
                        env=inst1.env, text=True, capture_output=True, timeout=60)
    assert (cp.returncode, cp.stdout) == (1, "")
    assert cp.stderr.startswith("fluxlite hostlist: stdin is closed")
    assert len(cp.stderr.splitlines()) == 1
    assert hostlist(inst1, "instance", stdin=subprocess.DEVNULL).stdout.strip()
