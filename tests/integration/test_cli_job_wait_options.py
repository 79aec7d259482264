"""`job wait` says what Flux's says, through the real CLI: with --all, `ID: ERROR`
for each job that failed and with -v `ID: job completed successfully` for the
others (on stderr); for one job its error alone, and -v adds nothing."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(120)


def test_wait_all_verbose_names_each_job(inst1):
    ok = inst1.cli("submit", "true", check=True).stdout.strip()
    bad = inst1.cli("submit", "sh", "-c", "exit 3", check=True).stdout.strip()
    cp = inst1.cli("job", "wait", "--all", "-v")
    assert (cp.returncode, cp.stdout) == (1, "")
    assert sorted(cp.stderr.splitlines()) == sorted(
        [f"{ok}: job completed successfully", f"{bad}: task(s) exited with exit code 3"])
    again = inst1.cli("submit", "sh", "-c", "exit 4", check=True).stdout.strip()
    cp = inst1.cli("job", "wait", "-v", again)
    assert (cp.returncode, cp.stdout, cp.stderr) == \
        (1, "", "fluxlite job wait: task(s) exited with exit code 4\n")


def test_a_job_ended_by_an_exception_is_flux_s_fatal_exception_line(inst1):
    """Flux's job-manager answers a wait on such a job `Fatal exception type=TYPE NOTE`,
    the words `job wait` prints alone, and `job wait --all` after `ID: `."""
    one = inst1.cli("submit", "sleep", "60", check=True).stdout.strip()
    inst1.cli("cancel", "-m", "no longer needed", one, check=True)
    cp = inst1.cli("job", "wait", one)
    assert (cp.returncode, cp.stdout, cp.stderr) == \
        (1, "", "fluxlite job wait: Fatal exception type=cancel no longer needed\n")
    two = inst1.cli("submit", "sleep", "60", check=True).stdout.strip()
    inst1.cli("job", "raise", "-t", "operator", "-m", "node drained", two, check=True)
    cp = inst1.cli("job", "wait", "--all")
    assert (cp.returncode, cp.stdout, cp.stderr) == \
        (1, "", f"{two}: Fatal exception type=operator node drained\n")
