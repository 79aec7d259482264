"""`fluxlite run --input` through the real CLI: stdin to some task ranks only, a
file named like a rank, ranks beyond the job's tasks refused."""

import pytest

from fluxlite.testing import one_error_line


def all_ids(inst) -> list[str]:
    return inst.cli("jobs", "-a", "-n", "-o", "{id.f58}", check=True).stdout.split()


def test_run_input_ranks_sends_stdin_to_those_tasks_only(inst4):
    cp = inst4.cli("run", "-n4", "--input=0,2", "--label-io", "sh", "-c",
                   'printf "%s:" "$FLUXLITE_TASK_RANK"; cat; echo', input="hello",
                   check=True)
    assert sorted(cp.stdout.splitlines()) == ["0: 0:hello", "1: 1:", "2: 2:hello", "3: 3:"]


def test_run_input_file_named_like_a_rank_is_given_as_a_path(inst1, tmp_path):
    (tmp_path / "0").write_text("from the file\n")
    cp = inst1.cli("run", "--cwd", str(tmp_path), f"--input={tmp_path}/0", "cat", check=True)
    assert cp.stdout == "from the file\n"


@pytest.mark.timeout(180)
def test_run_refuses_input_ranks_beyond_its_tasks(inst1):
    for ranks, said in (("5", "no task 5: the job's task ranks are 0-1"),
                        ("0-2", "no task 2: the job's task ranks are 0-1")):
        line = one_error_line(inst1.cli("run", "-n2", f"--input={ranks}", "cat", input="x\n"))
        assert line == f"fluxlite run: --input={ranks}: {said}"
    assert all_ids(inst1) == []
    cp = inst1.cli("run", "-n2", "-l", "--input=1", "cat", input="hi\n", check=True)
    assert cp.stdout == "1: hi\n"
