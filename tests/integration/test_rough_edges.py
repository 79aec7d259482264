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
