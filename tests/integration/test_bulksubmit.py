"""`submit --cc` templates in options (and {{cc}}, which is none) and `fluxlite
bulksubmit` (--wait, --dry-run, :::: with one file, --sep, --shuffle, -v), through
the CLI against real instances."""

import os

import pytest

from fluxlite.testing import one_error_line

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


def job_count(inst) -> int:
    return len(inst.cli("jobs", "-a", "-n", "-o", "{id}", check=True).stdout.split())


def test_bulksubmit_cross_product_of_input_lists(inst1, tmp_path):
    cp = inst1.cli("bulksubmit", "--wait", f"--output={tmp_path}/{{0}}{{1}}.out",
                   "--job-name={1}{0}", "echo", "{1}", "{0}", ":::", "a", "b", ":::", "x", "y",
                   check=True)
    assert len(cp.stdout.split()) == 4  # one id per job
    assert sorted(os.listdir(tmp_path)) == ["ax.out", "ay.out", "bx.out", "by.out"]
    for a in "ab":
        for x in "xy":
            assert (tmp_path / f"{a}{x}.out").read_text() == f"{x} {a}\n"
    names = inst1.cli("jobs", "-a", "-n", "-o", "{name}", check=True).stdout.split()
    assert sorted(names) == ["xa", "xb", "ya", "yb"]


def test_bulksubmit_reads_stdin_lines_without_separator(inst1):
    cp = inst1.cli("bulksubmit", "--quiet", "--wait", "sh", "-c", "exit {}",
                   input="1\n3\n2\n")
    assert (cp.returncode, cp.stdout, cp.stderr) == (3, "", "")
    assert job_count(inst1) == 3


def test_bulksubmit_attributes_seq_and_define(inst1, tmp_path):
    inst1.cli("bulksubmit", "--quiet", "--wait", "--define=p2=2**int(x[3])",
              f"--output={tmp_path}/{{./%}}.out", "echo", "{.%}", "{./}", "{.//}",
              "{seq}", "{seq1}", "{.p2}", "{:>3}|",
              ":::", "d/f1.txt", "e/f3.c", check=True)
    assert (tmp_path / "f1.out").read_text() == "d/f1 f1.txt d 0 1 2 d/f1.txt|\n"
    assert (tmp_path / "f3.out").read_text() == "e/f3 f3.c e 1 2 8 e/f3.c|\n"


def test_bulksubmit_cc_is_empty_without_cc_option(inst1, tmp_path):
    inst1.cli("bulksubmit", "--quiet", "--wait", f"--output={tmp_path}/{{}}{{cc}}.out",
              "--env=V=v{cc}", "sh", "-c", "echo {0}{cc} $V", ":::", "a", check=True)
    assert os.listdir(tmp_path) == ["a.out"]
    assert (tmp_path / "a.out").read_text() == "a v\n"


def test_bulksubmit_with_cc_and_linked_list(inst1, tmp_path):
    cp = inst1.cli("bulksubmit", "--quiet", "--wait", "--cc=1-{1}",
                   f"--output={tmp_path}/{{0}}-{{cc}}.out", "echo", "{0}", "{cc}",
                   ":::", "a", "b", ":::+", "2", "1", check=True)
    assert cp.stdout == ""
    assert sorted(os.listdir(tmp_path)) == ["a-1.out", "a-2.out", "b-1.out"]
    assert (tmp_path / "a-2.out").read_text() == "a 2\n"
    assert (tmp_path / "b-1.out").read_text() == "b 1\n"


def test_bulksubmit_watch_shows_output(inst1):
    cp = inst1.cli("bulksubmit", "--quiet", "--watch", "sh", "-c", "echo got {0}; exit {0}",
                   ":::", "0", "4")
    assert (cp.returncode, cp.stdout) == (4, "got 0\ngot 4\n")


def test_bulksubmit_dry_run_submits_nothing(inst1):
    cp = inst1.cli("bulksubmit", "--dry-run", "echo", "{1}", "{0}", ":::", "1", "2", ":::",
                   "3", "4", check=True)
    assert cp.stdout.splitlines() == [f"bulksubmit: submit echo {a} {b}"
                                      for b in "12" for a in "34"]
    assert job_count(inst1) == 0


@pytest.mark.parametrize("args, message", [
    (["echo", "{foo}", ":::", "1"], "'{foo}': unknown field '{foo}'"),
    (["echo", "{1}", ":::", "1"], "'{1}': unknown field '{1}': 1 input list(s), numbered from 0"),
    (["echo", "{.nope}", ":::", "1"], "'{.nope}': unknown field '.nope'"),
    (["echo", "ok {}", "{", ":::", "1"], "'{': Single '{' encountered in format string"),
    (["echo", "}", ":::", "1"], "'}': Single '}' encountered in format string"),
    (["--output={", "echo", ":::", "1"], "'{': Single '{' encountered in format string"),
    (["--define=p=(", "echo", "{.p}", ":::", "1"], "--define p: '(' was never closed"),
    (["--define=p", "echo", ":::", "1"], "--define 'p': expected NAME=CODE"),
    (["echo", "{}", ":::"], "no inputs: give them after ::: or as lines on stdin"),
])
def test_bulksubmit_bad_template_is_one_line_and_submits_nothing(inst1, args, message):
    cp = inst1.cli("bulksubmit", *args)
    assert cp.returncode != 0
    assert cp.stderr == f"fluxlite bulksubmit: {message}\n"
    assert cp.stdout == ""
    assert job_count(inst1) == 0


def test_bulksubmit_fills_in_numeric_options_as_flux_man_page_example(inst1, tmp_path):
    """flux-bulksubmit(1)'s own example: `--define=p2='2**int(x)' -n {.p2}`; a checked
    option (-n, -N, -t, --urgency, -o) holding a template is checked per input."""
    cp = inst1.cli("bulksubmit", "--dry-run", "--define=p2=2**int(x)", "-n", "{.p2}",
                   "-o", "verbose={}", "hostname", ":::", "0", "1", "2", check=True)
    assert cp.stdout.splitlines() == [
        f"bulksubmit: submit --ntasks={n} --setopt=verbose={i} hostname"
        for i, n in ((0, 1), (1, 2), (2, 4))]
    inst1.cli("bulksubmit", "--quiet", "--wait", "--define=p2=2**int(x)", "-n", "{.p2}",
              "--urgency={seq1}", f"--output={tmp_path}/n{{}}.out",
              "sh", "-c", "echo $FLUXLITE_JOB_SIZE", ":::", "0", "1", check=True)
    assert [(tmp_path / f"n{i}.out").read_text().split() for i in (0, 1)] == \
        [["1"], ["2", "2"]]
    rows = inst1.cli("jobs", "-a", "-n", "-o", "{ntasks} {urgency}", check=True).stdout
    assert sorted(rows.splitlines()) == ["1 1", "2 2"]


@pytest.mark.parametrize("args, message", [
    (["-n", "{}", "true", ":::", "2", "x"],
     "--ntasks=x (from {}): 'x' is not a valid integer range."),
    (["--urgency={}", "true", ":::", "40"],
     "--urgency=40 (from {}): '40': expected an integer from 0 to 31, or hold, "
     "expedite or default"),
])
def test_bulksubmit_bad_filled_in_option_is_one_line_and_submits_nothing(inst1, args, message):
    cp = inst1.cli("bulksubmit", *args)
    assert (cp.returncode, cp.stdout, cp.stderr) == (1, "", f"fluxlite bulksubmit: {message}\n")
    assert job_count(inst1) == 0


# -------------------------------- --wait, --dry-run, ::::, --sep, --shuffle, {{cc}}


def all_ids(inst) -> list[str]:
    return inst.cli("jobs", "-a", "-n", "-o", "{id.f58}", check=True).stdout.split()


@pytest.mark.timeout(180)
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


@pytest.mark.timeout(180)
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


@pytest.mark.timeout(180)
def test_bulksubmit_one_file_after_four_colons(inst1, tmp_path):
    (tmp_path / "a").write_text("1\n")
    (tmp_path / "b").write_text("2\n")
    line = one_error_line(inst1.cli("bulksubmit", "echo", "::::", "a", "b", cwd=tmp_path))
    assert "Multiple args not allowed after ::::" in line
    cp = inst1.cli("bulksubmit", "--dry-run", "echo", "{0}", "{1}", "::::", "a", "::::",
                   "b", cwd=tmp_path, check=True)
    assert cp.stdout == "bulksubmit: submit echo 1 2\n"


@pytest.mark.timeout(180)
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


@pytest.mark.timeout(180)
def test_doubled_braces_are_not_the_cc_field(inst1, tmp_path):
    inst1.cli("submit", "--cc=1-2", "--wait", "--quiet", f"--output={tmp_path}/cc{{cc}}",
              "echo", "{{cc}}", "{cc}", check=True)
    assert (tmp_path / "cc1").read_text() == "{{cc}} 1\n"
    assert (tmp_path / "cc2").read_text() == "{{cc}} 2\n"
