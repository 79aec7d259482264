"""Edges of the submitting commands and `jobs` where fluxlite differed from Flux, through
the real CLI against real instances: --wait saying why a job never started, per-task
input refused by submit, --begin-time bounds and `now`, unknown group subcommands,
Flux's job-list order and fields, bulksubmit's --dry-run/--sep/--shuffle/-v and ::::
with one file, --progress off a terminal, {{cc}}, empty path options."""

import subprocess

import pytest

from fluxlite.testing import _readline, fluxlite_command, jobid_of, one_error_line
from fluxlite.util import fluid

pytestmark = pytest.mark.timeout(180)


def f58_of(cp) -> str:
    return fluid.f58(jobid_of(cp))


def all_ids(inst) -> list[str]:
    return inst.cli("jobs", "-a", "-n", "-o", "{id.f58}", check=True).stdout.split()


def started(inst, f58: str) -> None:
    inst.cli("job", "wait-event", "-t", "60", f58, "start", check=True, timeout=90)


# ------------------------------------------------ 1. --wait says why a job never ran
@pytest.mark.parametrize("args,said", [
    (["--input=nosuch", "cat"], ["type=exec", "nosuch"]),
    (["--output=/nonexistent/dir/f", "echo"], ["type=exec", "/nonexistent/dir/f"]),
])
def test_wait_prints_the_exception_of_a_job_that_never_started(inst1, args, said):
    cp = inst1.cli("submit", "--wait", *args)
    line = one_error_line(cp)
    assert cp.returncode == 1
    f58 = cp.stdout.split()[0]
    assert line.startswith(f"job.exception {f58} type=exec severity=0 "), line
    assert all(s in line for s in said), line


def test_wait_on_a_dependency_that_fails_while_waiting(inst1):
    held = f58_of(inst1.cli("submit", "--urgency=hold", "false", check=True))
    with inst1.cli_background("submit", "--wait", f"--dependency=afterok:{held}",
                              "echo", "never") as p:
        waiter = _readline(p.stdout, 60).strip()  # submitted: its id
        inst1.cli("job", "urgency", held, "default", check=True)
        assert p.wait(60) == 1
        err = p.stderr.read()
    assert err.splitlines() == [
        f"job.exception {waiter} type=dependency severity=0 dependency "
        f"after-success={held} can never be satisfied (the job's result: FAILED)"], err


def test_bulksubmit_wait_one_line_per_job_that_never_started(inst1, tmp_path):
    (tmp_path / "here").write_text("data\n")
    cp = inst1.cli("bulksubmit", "--wait", f"--input={tmp_path}/{{}}", "sh", "-c",
                   "cat >/dev/null; exit 3", ":::", "gone1", "here", "gone2")
    ids = cp.stdout.split()
    assert cp.returncode == 3 and len(ids) == 3  # the largest exit code
    lines = cp.stderr.splitlines()  # nothing for the job that ran
    assert len(lines) == 2, cp.stderr
    for f58, name, line in zip(ids[::2], ("gone1", "gone2"), lines):
        assert line.startswith(f"job.exception {f58} type=exec ") and name in line


# ------------------------------------------------------- 2. per-task input
def test_submit_refuses_per_task_input(inst1, tmp_path):
    (tmp_path / "0").write_text("from file 0\n")
    for cmd in (["submit", "-n2"], ["bulksubmit", "-n2"]):
        cp = inst1.cli(*cmd, "--input=0", "cat", *([":::", "x"] if cmd[0] == "bulksubmit"
                                                    else []), cwd=tmp_path)
        line = one_error_line(cp)
        assert cp.returncode == 1
        assert "--input=0: per-task input not supported for submit" in line
    assert all_ids(inst1) == []
    # a file named like an idset is ./NAME
    cp = inst1.cli("submit", "--wait", "--input=./0", f"--output={tmp_path}/out", "cat",
                   cwd=tmp_path, check=True)
    assert (tmp_path / "out").read_text() == "from file 0\n"


def test_run_refuses_input_ranks_beyond_its_tasks(inst1):
    for ranks, said in (("5", "no task 5: the job's task ranks are 0-1"),
                        ("0-2", "no task 2: the job's task ranks are 0-1")):
        line = one_error_line(inst1.cli("run", "-n2", f"--input={ranks}", "cat", input="x\n"))
        assert line == f"fluxlite run: --input={ranks}: {said}"
    assert all_ids(inst1) == []
    cp = inst1.cli("run", "-n2", "-l", "--input=1", "cat", input="hi\n", check=True)
    assert cp.stdout == "1: hi\n"


# ------------------------------------------------------------- 3. begin-time
def test_begin_time_too_far_is_one_clear_line(inst1):
    line = one_error_line(inst1.cli("submit", "--begin-time=+100000000d", "true"))
    assert "'+100000000d' is too far in the future: the latest begin time is " in line
    assert "jobspec" not in line and "float" not in line
    assert all_ids(inst1) == []


def test_begin_time_now(inst1):
    cp = inst1.cli("submit", "--wait", "--begin-time=now", "true", check=True)
    assert cp.stderr == ""


# ------------------------------------------- 4. unknown subcommands, the job summary
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
    assert "purge" in names and len(names) == 17, names
    top = " ".join(run("--help").split("  job ")[1].split("  queue ")[0].split())
    summary = " ".join(group_help.split("Options:")[0].split())
    for name in names:
        assert f" {name}," in top or top.endswith(f" {name}"), (name, top)
        assert f" {name}," in summary or f" {name}." in summary, (name, summary)


# ------------------------------------------------------------- 5. jobs order
def test_jobs_lists_in_flux_order(instance_factory):
    inst = instance_factory(1, cores_per_rank=2)
    r1 = f58_of(inst.cli("submit", "sleep", "300", check=True))
    started(inst, r1)
    r2 = f58_of(inst.cli("submit", "sleep", "300", check=True))
    started(inst, r2)
    sub = {}
    for name, args in (("a", ["--urgency=10"]), ("b", ["--urgency=20"]), ("c", []),
                       ("held", ["--urgency=hold"]), ("d", ["--urgency=20"]),
                       ("dep", [f"--dependency=afterany:{r1}"])):
        sub[name] = f58_of(inst.cli("submit", *args, "true", check=True))
    rows = [ln.split() for ln in
            inst.cli("jobs", "-n", "-o", "{id.f58} {state} {priority}.", check=True)
            .stdout.splitlines()]
    assert [r[0] for r in rows] == [sub["b"], sub["d"], sub["c"], sub["a"], sub["held"],
                                    sub["dep"], r2, r1]
    # a job in DEPEND has no priority yet
    assert rows[5] == [sub["dep"], "DEPEND", "."]
    assert rows[4] == [sub["held"], "SCHED", "0."]
    inst.cli("cancel", "--all", check=True)
    for f58 in all_ids(inst):
        inst.cli("job", "wait-event", "-t", "60", f58, "clean", check=True, timeout=90)
    # inactive: latest ended first
    ended = [(float(t), i) for i, t in (ln.split() for ln in inst.cli(
        "jobs", "-a", "-n", "-o", "{id.f58} {t_inactive}", check=True).stdout.splitlines())]
    assert ended == sorted(ended, reverse=True) and len(ended) == 8


# ------------------------------------------------------------- 6. jobs fields
def test_jobs_fields_dependencies_success_inactive_reason(inst1):
    ok = inst1.cli("submit", "--wait", "true").stdout.split()[0]
    three = inst1.cli("submit", "--wait", "sh", "-c", "exit 3").stdout.split()[0]
    killed = inst1.cli("submit", "--wait", "sh", "-c", "kill $$").stdout.split()[0]
    held = f58_of(inst1.cli("submit", "--urgency=hold", "true", check=True))
    dep = f58_of(inst1.cli("submit", f"--dependency=afterok:{held}", "true", check=True))
    later = f58_of(inst1.cli("submit", "--begin-time=+1h", "true", check=True))
    fmt = "{id.f58}|{state}|{dependencies}|{success}|{inactive_reason}"
    rows = {ln.split("|")[0]: ln.split("|")[1:] for ln in
            inst1.cli("jobs", "-a", "-n", "-o", fmt, check=True).stdout.splitlines()}
    assert rows[dep] == ["DEPEND", f"after-success={held}", "", ""]
    assert rows[later][0:2] == ["DEPEND", rows[later][1]]
    assert rows[later][1].startswith("begin@")
    assert rows[ok][2:] == ["True", "Exit 0"]
    assert rows[three][2:] == ["False", "Exit 3"]
    assert rows[killed][2:] == ["False", "Terminated"]
    inst1.cli("cancel", "-m", "no more", held, check=True)
    inst1.cli("job", "wait-event", "-t", "60", dep, "clean", check=True, timeout=90)
    rows = {ln.split("|")[0]: ln.split("|")[1:] for ln in
            inst1.cli("jobs", "-a", "-n", "-o", fmt, check=True).stdout.splitlines()}
    assert rows[held][2:] == ["False", "Canceled: no more"]
    assert rows[dep][2] == "False"
    assert rows[dep][3].startswith(f"Exception: type=dependency note=dependency "
                                   f"after-success={held} ")
    headers = inst1.cli("jobs", "-o", "{dependencies} {success} {inactive_reason}",
                        check=True).stdout.splitlines()[0]
    assert headers.split() == ["DEPENDENCIES", "SUCCESS", "INACTIVE-REASON"]


# ------------------------------------------------------------- 7. bulksubmit
def test_bulksubmit_dry_run_shows_plain_text_options(inst1):
    cp = inst1.cli("bulksubmit", "--dry-run", "--output=/tmp/{}.out", "--job-name=n{}",
                   "--env=X={}", "--cwd=/tmp/{}", "--error=e{}", "--input=in{}",
                   "--label-io", "echo", "{}", ":::", "a", "b", check=True)
    lines = cp.stdout.splitlines()
    assert len(lines) == 2
    for x, line in zip("ab", lines):
        words = line.split()
        assert words[:2] == ["bulksubmit:", "submit"] and words[-2:] == ["echo", x]
        assert sorted(words[2:-2]) == sorted([
            f"--output=/tmp/{x}.out", f"--job-name=n{x}", f"--env=X={x}",
            f"--cwd=/tmp/{x}", f"--error=e{x}", f"--input=in{x}"]), line
    assert all_ids(inst1) == []


def test_bulksubmit_one_file_after_four_colons(inst1, tmp_path):
    (tmp_path / "a").write_text("1\n")
    (tmp_path / "b").write_text("2\n")
    line = one_error_line(inst1.cli("bulksubmit", "echo", "::::", "a", "b", cwd=tmp_path))
    assert "Multiple args not allowed after ::::" in line
    cp = inst1.cli("bulksubmit", "--dry-run", "echo", "{0}", "{1}", "::::", "a", "::::",
                   "b", cwd=tmp_path, check=True)
    assert cp.stdout == "bulksubmit: submit echo 1 2\n"


def test_bulksubmit_sep_verbose_and_shuffle(inst1, tmp_path):
    cp = inst1.cli("bulksubmit", "--quiet", "--wait", "--sep=,", "-v",
                   f"--output={tmp_path}/{{}}.out", "echo", "{}", input="a,b,c",
                   check=True)
    assert cp.stdout.splitlines() == [
        f"bulksubmit: submit --output={tmp_path}/{x}.out echo {x}" for x in "abc"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.out", "b.out", "c.out"]
    assert (tmp_path / "b.out").read_text() == "b\n"
    cp = inst1.cli("bulksubmit", "--dry-run", "--sep=none", "echo", "{}", input="x y\nz",
                   check=True)
    assert cp.stdout.split("\n")[:-1] == [f"bulksubmit: submit echo {x}" for x in "xyz"]
    words = [str(i) for i in range(40)]
    cp = inst1.cli("bulksubmit", "--dry-run", "--shuffle", "echo", "{seq}={}", ":::",
                   *words, check=True)
    got = [ln.split()[-1] for ln in cp.stdout.splitlines()]
    assert sorted(got) == sorted(f"{i}={i}" for i in range(40))  # each keeps its {seq}
    assert got != [f"{i}={i}" for i in range(40)]


# ------------------------------------------------------------------ 8. smaller
def test_progress_off_a_terminal_is_ignored_with_a_warning(inst1):
    cp = inst1.cli("submit", "--wait", "--progress", "true", check=True)
    assert cp.stderr == "fluxlite submit: stdout is not a tty. Ignoring --progress option\n"
    assert len(cp.stdout.split()) == 1


def test_doubled_braces_are_not_the_cc_field(inst1, tmp_path):
    inst1.cli("submit", "--cc=1-2", "--wait", "--quiet", f"--output={tmp_path}/cc{{cc}}",
              "echo", "{{cc}}", "{cc}", check=True)
    assert (tmp_path / "cc1").read_text() == "{{cc}} 1\n"
    assert (tmp_path / "cc2").read_text() == "{{cc}} 2\n"


@pytest.mark.parametrize("option,said", [
    ("--output=", "Invalid value for '--output': empty: expected a file name"),
    ("--error=", "Invalid value for '--error': empty: expected a file name"),
    ("--input=", "Invalid value for '--input': empty: expected a file name"),
    ("--cwd=", "Invalid value for '--cwd': empty: expected a directory"),
])
def test_empty_path_options_are_refused(inst1, option, said):
    for cmd in ("submit", "run", "bulksubmit"):
        line = one_error_line(inst1.cli(cmd, option, "true", *([":::", "x"] if cmd ==
                                                                 "bulksubmit" else [])))
        assert line.startswith(f"fluxlite {cmd}: {said}"), line
    assert all_ids(inst1) == []
