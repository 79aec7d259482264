"""Mustache templates ({{id}}, {{taskid}}, ...) in --output/--error and the
command's arguments, through the real CLI, as Flux's job shell expands them."""

import os

import pytest

from fluxlite.testing import jobid_of
from fluxlite.util import fluid


def submit_wait(inst, *args):
    cp = inst.cli("submit", "--wait", *args, check=True)
    return jobid_of(cp)


def test_id_forms_in_output_names(inst1, tmp_path):
    jobid = submit_wait(inst1, "--cwd", str(tmp_path), "--output",
                        "{{id.dec}}-{{id.hex}}-{{id.dothex}}-{{id.f58plain}}-{{id.kvs}}.out",
                        "echo", "hi")
    name = f"{jobid}-0x{jobid:x}-{fluid.dothex(jobid)}-{fluid.f58_plain(jobid)}-" \
           f"job.{fluid.dothex(jobid)}.out"
    assert (tmp_path / name).read_text() == "hi\n"


def test_id_and_f58_are_the_f58_id(inst1, tmp_path):
    jobid = submit_wait(inst1, "--cwd", str(tmp_path), "--output", "{{id}}.{{jobid.f58}}.out",
                        "echo", "x")
    files = os.listdir(tmp_path)
    assert len(files) == 1
    a, b, _ = files[0].split(".")
    assert a == b and fluid.parse(a) == jobid


def test_name_nnodes_size_in_output(inst4, tmp_path):
    submit_wait(inst4, "--cwd", str(tmp_path), "-N2", "-n4", "--job-name", "sim",
                "--output", "{{name}}-{{nnodes}}-{{size}}-{{ntasks}}.out", "true")
    assert os.listdir(tmp_path) == ["sim-2-4-4.out"]


def test_default_name_is_the_command(inst1, tmp_path):
    submit_wait(inst1, "--cwd", str(tmp_path), "--output", "{{name}}.out", "echo", "x")
    assert (tmp_path / "echo.out").read_text() == "x\n"


def test_taskid_gives_each_task_its_own_file(inst4, tmp_path):
    submit_wait(inst4, "--cwd", str(tmp_path), "-N2", "-n4", "--output", "out.{{taskid}}",
                "--error", "err.{{task.id}}", "sh", "-c",
                "echo o$FLUXLITE_TASK_RANK; echo e$FLUXLITE_TASK_RANK >&2")
    for r in range(4):
        assert (tmp_path / f"out.{r}").read_text() == f"o{r}\n"
        assert (tmp_path / f"err.{r}").read_text() == f"e{r}\n"


def test_per_task_files_are_truncated_by_their_shell(inst4, tmp_path):
    for r in range(2):
        (tmp_path / f"o.{r}").write_text("stale stale stale stale\n")
    submit_wait(inst4, "--cwd", str(tmp_path), "-N2", "-n2", "--output", "o.{{taskid}}",
                "sh", "-c", "echo $FLUXLITE_TASK_RANK")
    assert [(tmp_path / f"o.{r}").read_text() for r in range(2)] == ["0\n", "1\n"]


def test_templates_in_command_arguments(inst4, tmp_path):
    out = tmp_path / "out"
    jobid = submit_wait(inst4, "-N2", "-n2", "--output", str(out), "--label-io",
                        "echo", "{{taskid}}/{{size}}/{{nnodes}}/{{id.dec}}/{{node.id}}")
    lines = sorted(out.read_text().splitlines())
    assert lines == [f"0: 0/2/2/{jobid}/0", f"1: 1/2/2/{jobid}/1"]


def test_tmpdir_in_arguments_is_the_jobs_directory(inst1, tmp_path):
    out = tmp_path / "out"
    submit_wait(inst1, "--output", str(out), "sh", "-c",
                'test "$1" = "$FLUXLITE_JOB_TMPDIR" && test -d "$1" && echo same', "sh",
                "{{tmpdir}}")
    assert out.read_text() == "same\n"


def test_unknown_text_in_arguments_passes_through(inst1, tmp_path):
    # as in Flux: what is not a tag of the job stays as it was in the command
    out = tmp_path / "out"
    submit_wait(inst1, "--output", str(out), "echo", "{{nosuch}}")
    assert out.read_text() == "{{nosuch}}\n"


@pytest.mark.parametrize("opt,flag", [("--output", "--output"), ("--error", "--error")])
def test_unknown_template_in_file_name_is_refused_at_submit(inst1, tmp_path, opt, flag):
    cp = inst1.cli("submit", "--cwd", str(tmp_path), opt, "x.{{taskidd}}", "true")
    assert cp.returncode != 0
    assert cp.stderr.strip().splitlines() == [
        f"fluxlite submit: {flag}: unknown mustache template '{{{{taskidd}}}}'"]
    assert os.listdir(tmp_path) == []


def test_emoji_encoding_names_the_file(inst1, tmp_path):
    cp = inst1.cli("run", "--cwd", str(tmp_path), "--output", "{{id.emoji}}", "-v", "echo",
                   "hi", check=True)
    jobid = cp.stderr.split()[1]
    emoji = inst1.cli("job", "id", "--to=emoji", jobid, check=True).stdout.strip()
    assert (tmp_path / emoji).read_text() == "hi\n"


def test_words_encoding_names_the_file(inst1, tmp_path):
    cp = inst1.cli("run", "--cwd", str(tmp_path), "--output", "{{id.words}}", "-v", "echo",
                   "hi", check=True)
    jobid = cp.stderr.split()[1]
    words = inst1.cli("job", "id", "--to=words", jobid, check=True).stdout.strip()
    assert (tmp_path / words).read_text() == "hi\n"
