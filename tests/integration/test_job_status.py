"""`fluxlite job status`, `job last` and `submit --flags` through the real CLI, as
flux-job(1): exit codes as a shell's (128+signal), exceptions, the newest jobs first."""

import pytest

from fluxlite.testing import one_error_line


def ids_of(cp) -> list[str]:
    return cp.stdout.split()


def test_status_exit_codes(inst1):
    inst = inst1
    zero = ids_of(inst.cli("submit", "true", check=True))[0]
    one = ids_of(inst.cli("submit", "false", check=True))[0]
    sigint = ids_of(inst.cli("submit", "sh", "-c", "kill -INT $$", check=True))[0]
    # a request that can never fit is a job (as Flux's), denied by the scheduler
    denied = ids_of(inst.cli("submit", "-n", "1024", "true", check=True))[0]
    # a job ended by an exception before it ran: its dependency can never be met
    never = ids_of(inst.cli("submit", f"--dependency=afterok:{one}", "true"))[0]
    inst.cli("queue", "stop", "--quiet", check=True)
    canceled = ids_of(inst.cli("submit", "true", check=True))[0]
    inst.cli("cancel", canceled, check=True)
    inst.cli("queue", "start", "--quiet", check=True)
    assert inst.cli("job", "status", zero, timeout=30).returncode == 0
    assert inst.cli("job", "status", one, timeout=30).returncode == 1
    cp = inst.cli("job", "status", "-v", sigint, timeout=30)
    assert cp.returncode == 130
    assert cp.stderr == f"fluxlite job status: {sigint}: exited with exit code 130\n"
    cp = inst.cli("job", "status", "-v", denied, timeout=30)
    assert cp.returncode == 1
    assert cp.stderr == f"fluxlite job status: {denied}: exception type=alloc\n"
    cp = inst.cli("job", "status", "-v", never, timeout=30)
    assert cp.returncode == 1
    assert cp.stderr == f"fluxlite job status: {never}: exception type=dependency\n"
    assert inst.cli("job", "status", canceled, timeout=30).returncode == 1
    assert inst.cli("job", "status", "-e", "42", canceled, timeout=30).returncode == 42
    cp = inst.cli("job", "status", "-vv", zero, one, sigint, timeout=30)
    assert cp.returncode == 130
    assert f"{zero}: exited with exit code 0" in cp.stderr
    cp = inst.cli("job", "status", "--json", zero, timeout=30, check=True)
    assert '"waitstatus":0,"result":1}' in cp.stdout  # Flux's result object, compact
    # status is not a wait: the job may still be waited for
    cp = inst.cli("job", "wait", "-v", zero, timeout=30, check=True)
    assert (cp.stdout, cp.stderr) == ("", "")


def test_status_waits_for_a_running_job(inst1):
    jobid = ids_of(inst1.cli("submit", "sleep", "60", check=True))[0]
    with inst1.cli_background("job", "status", jobid) as p:
        inst1.cli("job", "wait-event", "-t", "30s", jobid, "start", check=True)
        inst1.cli("job", "kill", "-s", "TERM", jobid, check=True)
        assert p.wait(timeout=30) == 128 + 15


@pytest.mark.parametrize("args, words", [
    (["status", "X"], 'error parsing jobid: "X"'),
    (["status"], "Missing argument"),
    (["status", "-e", "300", "f1"], "300 is not in the range"),
    (["last", "0"], "expected a positive count N or a slice"),
    (["last", "[a:b]"], "expected a positive count N or a slice"),
    (["last", "[::0]"], "a slice step cannot be zero"),
])
def test_bad_input_is_one_line(inst1, args, words):
    cp = inst1.cli("job", *args, timeout=30)
    line = one_error_line(cp)
    assert line.startswith(f"fluxlite job {args[0]}: ") and words in line
    if "--help" in line:  # the help it points to exists
        assert inst1.cli("job", args[0], "--help", check=True).stdout.startswith("Usage:")


def test_status_of_an_unknown_job(inst1):
    cp = inst1.cli("job", "status", "f1", timeout=30)
    assert one_error_line(cp) == "fluxlite job status: unknown job id ƒ1"


def test_last(inst1):
    cp = inst1.cli("job", "last", timeout=30)
    assert one_error_line(cp) == "fluxlite job last: job history is empty"
    submitted = ids_of(inst1.cli("submit", "--cc=0-4", "--flags=waitable", "true",
                                 check=True))
    assert len(submitted) == 5
    assert ids_of(inst1.cli("job", "last", check=True)) == submitted[-1:]
    assert ids_of(inst1.cli("job", "last", "2", check=True)) == submitted[::-1][:2]
    assert ids_of(inst1.cli("job", "last", "[:]", check=True)) == submitted[::-1]
    assert ids_of(inst1.cli("job", "last", "[::-1]", check=True)) == submitted
    assert ids_of(inst1.cli("job", "last", "[1:3]", check=True)) == submitted[::-1][1:3]


def test_submit_flags(inst1):
    cp = inst1.cli("submit", "--flags=waitable", "--wait", "true", timeout=30, check=True)
    assert len(ids_of(cp)) == 1
    # Flux's three flags are all accepted (debug and novalidate change nothing here)
    cp = inst1.cli("submit", "--flags=waitable,debug", "--flags=novalidate", "--wait",
                   "true", timeout=30, check=True)
    assert len(ids_of(cp)) == 1
    cp = inst1.cli("submit", "--flags=waitable,bogus", "true", timeout=30)
    assert cp.returncode == 2
    line = one_error_line(cp)
    assert "'bogus'" in line and "debug, waitable or novalidate" in line
