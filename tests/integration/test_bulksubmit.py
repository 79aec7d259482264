"""`submit --cc` templates in options and `fluxlite bulksubmit`, through the CLI against
real instances."""

import os

import pytest

pytestmark = pytest.mark.timeout(120)


def test_cc_expands_in_output_and_name_options(inst1, tmp_path):
    cp = inst1.cli("submit", "--cc=1-3", "--quiet", "--wait",
                   f"--output={tmp_path}/cc{{cc}}.out", "--job-name=copy{cc}",
                   f"--cwd={tmp_path}", "--env=WHICH=w{cc}",
                   "sh", "-c", "echo copy {cc} $WHICH $FLUXLITE_JOB_CC $(pwd)", check=True)
    assert cp.stdout == ""
    assert sorted(os.listdir(tmp_path)) == ["cc1.out", "cc2.out", "cc3.out"]
    for i in (1, 2, 3):
        assert (tmp_path / f"cc{i}.out").read_text() == f"copy {i} w{i} {i} {tmp_path}\n"
    names = inst1.cli("jobs", "-a", "-n", "-o", "{name}", check=True).stdout.split()
    assert sorted(names) == ["copy1", "copy2", "copy3"]


def test_cc_expands_in_input(inst1, tmp_path):
    for i in (1, 2):
        (tmp_path / f"in{i}").write_text(f"data {i}\n")
    inst1.cli("submit", "--cc=1-2", "--quiet", "--wait", f"--input={tmp_path}/in{{cc}}",
              f"--output={tmp_path}/out{{cc}}", "cat", check=True)
    assert [(tmp_path / f"out{i}").read_text() for i in (1, 2)] == ["data 1\n", "data 2\n"]
