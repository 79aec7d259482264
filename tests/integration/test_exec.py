"""`fluxlite exec` through the real CLI: commands on broker ranks outside any job,
their output and input streamed through rexec, and Flux's exit statuses (the
largest exit code, 128+N for signal N, 127 not found, a closing line per exit)."""

import os
import signal
import subprocess

from fluxlite.testing import fluxlite_command, one_error_line, wait_fifo, wait_pids_gone


def test_every_rank_labelled_and_exit_zero(inst4):
    cp = inst4.cli("exec", "-l", "sh", "-c", "echo out $(fluxlite getattr rank); echo err >&2",
                   check=True)
    assert sorted(cp.stdout.splitlines()) == [f"{r}: out {r}" for r in range(4)]
    assert sorted(cp.stderr.splitlines()) == [f"{r}: err" for r in range(4)]


def test_rank_and_exclude_choose_the_targets(inst4):
    cp = inst4.cli("exec", "-l", "-r", "1-3", "-x", "2", "fluxlite", "getattr", "rank",
                   check=True)
    assert sorted(cp.stdout.splitlines()) == ["1: 1", "3: 3"]
    cp = inst4.cli("exec", "-r", "7", "true")
    assert cp.returncode == 1
    assert one_error_line(cp) == "fluxlite exec: One or more invalid --ranks specified: 7"
    cp = inst4.cli("exec", "-r", "0", "-x", "0", "true")
    assert one_error_line(cp) == "fluxlite exec: No targets specified"


def test_exit_status_is_the_largest_with_flux_closing_lines(inst4):
    cp = inst4.cli("exec", "sh", "-c", 'exit $(fluxlite getattr rank)')
    assert cp.returncode == 3
    assert cp.stderr.splitlines() == ["[1]: Exit 1", "[2]: Exit 2", "[3]: Exit 3"]
    cp = inst4.cli("exec", "-q", "-r", "1", "sh", "-c", "exit 5")
    assert (cp.returncode, cp.stderr) == (5, "")
    cp = inst4.cli("exec", "-r", "2", "sh", "-c", "kill -TERM $$")
    assert cp.returncode == 128 + signal.SIGTERM
    assert cp.stderr.splitlines() == ["[2]: Terminated"]


def test_a_command_that_cannot_start(inst1):
    cp = inst1.cli("exec", "no-such-command-here")
    assert cp.returncode == 127
    assert one_error_line(cp) == ("fluxlite exec: Error: rank 0: no-such-command-here: "
                                  "No such file or directory")


def test_stdin_reaches_every_command_and_noinput_closes_it(inst4, tmp_path):
    cp = inst4.cli("exec", "-l", "-r", "0,3", "cat", input="one\ntwo\n", check=True)
    assert sorted(cp.stdout.splitlines()) == ["0: one", "0: two", "3: one", "3: two"]
    cp = inst4.cli("exec", "-n", "-r", "1", "cat", input="ignored\n", check=True)
    assert cp.stdout == ""


def test_dir_and_environment(inst1, tmp_path):
    cp = inst1.cli("exec", "-d", str(tmp_path), "sh", "-c", "pwd; echo $MARK",
                   env={"MARK": "carried"}, check=True)
    assert cp.stdout.splitlines() == [str(tmp_path), "carried"]


def _background_exec(inst, tmp_path, script, *options):
    """exec running `script` on rank 0; its first write to the FIFO $READY returns."""
    fifo = tmp_path / "ready"
    os.mkfifo(fifo)
    proc = subprocess.Popen(fluxlite_command() + ["exec", "-n", *options, "sh", "-c", script],
                            env=dict(inst.env, READY=str(fifo)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    return proc, wait_fifo(fifo, timeout=30)


def test_interrupt_is_forwarded_to_the_commands(inst1, tmp_path):
    """SIGINT to exec reaches the remote command, whose exit exec reports."""
    script = "trap 'echo got INT; exit 7' INT; echo ready > $READY; while :; do sleep 0.1; done"
    proc, said = _background_exec(inst1, tmp_path, script)
    try:
        assert said == "ready\n"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert out == "got INT\n"
    assert proc.returncode == 7
    assert err.splitlines() == ["[0]: Exit 7"]


def test_a_vanished_client_takes_its_command_with_it(inst1, tmp_path):
    """exec killed outright: the broker kills the command it was running for it."""
    proc, said = _background_exec(inst1, tmp_path, "echo $$ > $READY; exec sleep 300")
    pid = int(said)
    proc.kill()
    proc.wait()
    assert wait_pids_gone([pid], 30) == set()


def test_third_interrupt_leaves_a_command_that_ignores_them(inst1, tmp_path):
    """As flux exec: each Ctrl-C is forwarded (-v says so), the second also warns, a
    third within 2 s leaves (exit 1) naming the ranks still running; the broker then
    kills what was left."""
    proc, said = _background_exec(inst1, tmp_path,
                                  "trap '' INT; echo $$ > $READY; exec sleep 300", "-v")
    pid = int(said)

    def next_line() -> str:
        # each signal is sent once the previous one was handled (signals sent at once
        # may merge); a line that never comes is the test's timeout, an exit is ""
        return proc.stderr.readline().rstrip("\n")

    forwarded = "sending signal 2 to 1 running processes"
    try:
        proc.send_signal(signal.SIGINT)
        assert next_line() == forwarded
        proc.send_signal(signal.SIGINT)
        assert next_line() == forwarded
        assert next_line() == "interrupt (Ctrl+C) one more time within 2.00 sec to exit"
        proc.send_signal(signal.SIGINT)
        assert next_line() == "[0]: command still running at exit"
        assert proc.wait(30) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert wait_pids_gone([pid], 30) == set()


def test_jobid_runs_on_the_ranks_of_a_job_counted_from_its_first(inst4):
    first = inst4.cli("submit", "-N2", "sleep", "300", check=True).stdout.strip()
    second = inst4.cli("submit", "-N2", "sleep", "300", check=True).stdout.strip()
    inst4.cli("job", "wait-event", "-t", "60", second, "start", check=True)
    ranks = inst4.cli("jobs", "-n", "-o", "{ranks}", second, check=True).stdout.strip()
    assert ranks == "[2-3]"      # the first job holds ranks 0-1
    cp = inst4.cli("exec", "-l", f"--jobid={second}", "fluxlite", "getattr", "rank", check=True)
    assert sorted(cp.stdout.splitlines()) == ["0: 2", "1: 3"]
    cp = inst4.cli("exec", "-l", "-j", second, "-x", "0", "fluxlite", "getattr", "rank",
                   check=True)
    assert cp.stdout.splitlines() == ["1: 3"]
    cp = inst4.cli("exec", "-j", second, "-r", "2", "true")
    assert one_error_line(cp) == "fluxlite exec: One or more invalid --ranks specified: 2"
    inst4.cli("cancel", first, second, check=True)
    inst4.cli("job", "wait-event", "-t", "60", second, "clean", check=True)
    cp = inst4.cli("exec", "-j", second, "true")
    assert cp.returncode == 1 and one_error_line(cp).endswith(f"job {second} is not running")
    cp = inst4.cli("exec", "--jobid=f-o-o", "true")
    assert cp.returncode == 1 and "error parsing jobid" in one_error_line(cp)
