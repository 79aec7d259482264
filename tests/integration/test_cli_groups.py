"""Command groups through the real CLI, as click and Flux show them: a bare group
prints its help, an unknown subcommand points to the group's help, and `job`'s
summary names every subcommand."""

import subprocess

import pytest

from fluxlite.testing import fluxlite_command, one_error_line

pytestmark = pytest.mark.timeout(180)


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


@pytest.mark.parametrize("group", ["job", "queue", "kvs", "resource", "overlay"])
def test_unknown_subcommand_points_to_the_group_help(group):
    cp = subprocess.run(fluxlite_command() + [group, "bogus"], capture_output=True,
                        text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert one_error_line(cp) == (f"fluxlite {group}: No such command 'bogus'. "
                                  f"(see 'fluxlite {group} --help')")
    assert cp.returncode == 2


def test_job_summary_names_every_subcommand():
    def run(*args):
        return subprocess.run(fluxlite_command() + list(args), capture_output=True,
                              text=True, timeout=60, check=True).stdout
    group_help = run("job", "--help")
    names = [ln.split()[0] for ln in group_help.split("Commands:")[1].splitlines()
             if ln.startswith("  ") and not ln.startswith("   ")]
    assert "purge" in names and "killall" in names and len(names) == 20, names
    top = " ".join(run("--help").split("  job ")[1].split("  queue ")[0].split())
    summary = " ".join(group_help.split("Options:")[0].split())
    for name in names:
        assert f" {name}," in top or top.endswith(f" {name}"), (name, top)
        assert f" {name}," in summary or f" {name}." in summary, (name, summary)
