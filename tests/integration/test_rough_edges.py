"""Rough edges a Flux user hits first, through the real CLI: bare groups print
their help, suggestions that exist, URIs that are no client socket, and
submission options read as Flux reads them."""

import subprocess

import pytest

from fluxlite.testing import fluxlite_command


def bare(*args, env=None):
    return subprocess.run([*fluxlite_command(), *args], capture_output=True, text=True,
                          timeout=60, env=env)


@pytest.mark.parametrize("group", [(), ("job",), ("resource",), ("kvs",), ("overlay",)])
def test_bare_group_prints_its_help_as_click_does(group):
    cp = bare(*group)
    assert cp.returncode == 2 and cp.stdout == ""
    lines = cp.stderr.splitlines()
    assert lines[0] == f"Usage: {' '.join(('fluxlite',) + group)} [OPTIONS] COMMAND [ARGS]..."
    assert "Commands:" in lines and cp.stderr.endswith("\n")


@pytest.mark.parametrize("args,said", [
    (("resource", "list", "-o", "rlist"), "named formats: default; or a format string"),
    (("jobs", "-o", "deps"), "named formats: "),
    (("jobs", "-o", "nnodes"), "Did you mean '{nnodes}'?"),
    (("resource", "status", "-o", "lng"), "Did you mean 'long'?"),
    (("resource", "status", "-o", "reasn"), "Did you mean '{reason}'?"),
])
def test_format_suggestions_point_to_something_that_exists(inst1, args, said):
    cp = inst1.cli(*args)
    assert cp.returncode != 0 and cp.stdout == ""
    assert len(cp.stderr.splitlines()) == 1 and said in cp.stderr, cp.stderr
    assert "'{rlist}'" not in cp.stderr and "'{deps}'" not in cp.stderr
