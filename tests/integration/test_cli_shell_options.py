"""Flux's shell options through the real CLI, as a Flux user types them: what each
does to the tasks (their cores, GPUs, signals, oom score, PMI), the spellings Flux's
shell takes (`verbose,per-task`, `signal.signum=`, `pmi=pmi1`, a jobspec's nested
`output.stdout.path`), and the shell's log lines as `run` and `job attach` show them."""

from __future__ import annotations

import json
import os
import re

import pytest

pytestmark = pytest.mark.timeout(180)

CPUS = "grep Cpus_allowed_list /proc/self/status"
STAMPED = re.compile(r"^\d+\.\d{3}s: fluxlite-shell\[\d+\]: [A-Z]+: ")


def two_cores() -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("binding tasks to different cores needs 2 usable cores")


def by_rank(out: str) -> dict[int, str]:
    """`-l` output of one line a task: {task rank: the rest of its line}."""
    lines = dict(line.split(": ", 1) for line in out.splitlines())
    return {int(k): v.split("\t")[-1] for k, v in lines.items()}


def test_job_attach_stamps_every_shell_log_line(inst1):
    """The output log answers before the main eventlog: its log lines wait for the
    submit time that stamps them (they came unstamped from a finished job)."""
    jobid = inst1.cli("submit", "-o", "verbose", "-n2", "true", check=True).stdout.strip()
    inst1.cli("job", "wait", jobid, check=True)
    for _ in range(3):
        cp = inst1.cli("job", "attach", jobid)
        lines = cp.stderr.splitlines()
        assert cp.returncode == 0 and len(lines) >= 3, cp.stderr
        assert all(STAMPED.match(line) for line in lines), cp.stderr


def test_cpu_affinity_binds_each_task_as_asked(inst1):
    two_cores()
    run = ["run", "-N1", "-n2", "-l"]
    per_task = by_rank(inst1.cli(*run, "-o", "cpu-affinity=per-task", "sh", "-c", CPUS,
                                 check=True).stdout)
    assert sorted(per_task.values()) == ["0", "1"]
    mapped = by_rank(inst1.cli(*run, "-o", "cpu-affinity=map:1;0", "sh", "-c", CPUS,
                               check=True).stdout)
    assert mapped == {0: "1", 1: "0"}
    on = by_rank(inst1.cli(*run, "sh", "-c", CPUS, check=True).stdout)
    assert on == {0: "0-1", 1: "0-1"}
    one = inst1.cli("run", "-n1", "sh", "-c", CPUS, check=True).stdout
    assert one.split()[-1] in ("0", "1")   # the one core the job was given
    off = inst1.cli("run", "-n1", "-o", "cpu-affinity=off", "sh", "-c", CPUS,
                    check=True).stdout
    assert off.split()[-1] == "0-1"


def test_cpu_affinity_verbose_and_dry_run_come_first(inst1):
    """Flux's `verbose,MODE` logs the cores and binds; `dry-run,MODE` logs them only."""
    two_cores()
    run = ["run", "-N1", "-n2", "-l"]
    cp = inst1.cli(*run, "-o", "cpu-affinity=verbose,per-task", "sh", "-c", CPUS)
    assert cp.returncode == 0, cp.stderr
    assert sorted(by_rank(cp.stdout).values()) == ["0", "1"]
    assert re.search(r"fluxlite-shell\[0\]: INFO: cpus: 0-1$", cp.stderr, re.M), cp.stderr
    assert len(re.findall(r"task \d: cpus: \d$", cp.stderr, re.M)) == 2, cp.stderr
    cp = inst1.cli(*run, "-o", "cpu-affinity=dry-run,per-task", "sh", "-c", CPUS)
    assert cp.returncode == 0, cp.stderr
    assert by_rank(cp.stdout) == {0: "0-1", 1: "0-1"}     # logged, not bound
    assert len(re.findall(r"task \d: cpus: \d$", cp.stderr, re.M)) == 2, cp.stderr
    cp = inst1.cli("run", "-o", "cpu-affinity=verbose", "true")
    assert (cp.returncode, cp.stdout) == (0, ""), cp.stderr
    assert "INFO: cpus: " in cp.stderr


def test_signal_members_send_the_signal(inst1):
    """-o signal.signum=N -o signal.timeleft=FSD (Flux's spelling of --signal)."""
    trap = "trap 'echo got USR2; exit 0' USR2; sleep 30 & wait"
    cp = inst1.cli("run", "-t", "3s", "-o", "signal.signum=12", "-o", "signal.timeleft=2s",
                   "sh", "-c", trap)
    assert (cp.returncode, cp.stdout) == (0, "got USR2\n"), cp.stderr
    spec = json.loads(inst1.cli("submit", "--dry-run", "-o", "signal.signum=12", "-o",
                                "signal.timeleft=2s", "true", check=True).stdout)
    assert spec["attributes"]["system"]["shell"]["options"]["signal"] == \
        {"signum": 12, "timeleft": "2s"}
    # -o signal=0 sends nothing, as Flux's
    cp = inst1.cli("run", "-t", "3s", "-o", "signal=0", "sh", "-c", "sleep 0.1; echo done")
    assert (cp.returncode, cp.stdout) == (0, "done\n"), cp.stderr


def test_a_flux_jobspec_with_nested_shell_options(inst1, tmp_path):
    """A jobspec written by Flux's tools nests dotted options: the shell reads them."""
    out = tmp_path / "nested.out"
    options = {"output": {"stdout": {"type": "file", "path": str(out)}},
               "signal": {"signum": 10}}
    spec = {"version": 1,
            "resources": [{"type": "slot", "count": 1, "label": "task",
                           "with": [{"type": "core", "count": 1}]}],
            "tasks": [{"command": ["sh", "-c", "echo out; echo err >&2"], "slot": "task",
                       "count": {"per_slot": 1}}],
            "attributes": {"system": {"duration": 0, "cwd": str(tmp_path),
                                      "shell": {"options": options}}}}
    path = tmp_path / "job.json"
    path.write_text(json.dumps(spec))
    jobid = inst1.cli("job", "submit", path, check=True).stdout.strip()
    cp = inst1.cli("job", "attach", jobid)
    assert (cp.returncode, cp.stdout) == (0, ""), cp.stderr
    assert out.read_text() == "out\nerr\n"


def test_pmi_aliases_and_flux_builtin_options(inst1):
    probe = "echo ${PMI_FD:+pmi} $(cat /proc/self/oom_score_adj)"
    for pmi in ("pmi1", "pmi2", "simple,pmi2"):
        cp = inst1.cli("run", "-o", f"pmi={pmi}", "sh", "-c", probe)
        assert (cp.returncode, cp.stdout.split()[0]) == (0, "pmi"), (pmi, cp.stderr)
    cp = inst1.cli("run", "-o", "oom.adjust=500", "-o", "rexec-shutdown-timeout=30s", "-o",
                   "coprocess-kill-timeout=5s", "-o", "stop-tasks-in-exec=0", "sh", "-c",
                   probe)
    assert (cp.returncode, cp.stdout.split(), cp.stderr) == (0, ["pmi", "500"], "")
    cp = inst1.cli("run", "-o", "oom.adjust=5000", "true")
    assert cp.returncode == 1 and "oom.adjust must be a number" in cp.stderr


def test_gpu_affinity_without_gpus_hides_them(inst1):
    """As Flux's gpubind: a job given no GPU sees none (CUDA_VISIBLE_DEVICES=-1), in
    PCI bus order; gpu-affinity=off leaves the variables alone."""
    show = "echo ${CUDA_VISIBLE_DEVICES-unset} ${CUDA_DEVICE_ORDER-unset}"
    cp = inst1.cli("run", "sh", "-c", show, env={"CUDA_VISIBLE_DEVICES": ""})
    assert cp.stdout.split() == ["-1", "PCI_BUS_ID"], cp.stderr
    cp = inst1.cli("run", "-o", "gpu-affinity=off", "sh", "-c", show,
                   env={"CUDA_DEVICE_ORDER": "FASTEST_FIRST"})
    assert cp.stdout.split()[1] == "FASTEST_FIRST", cp.stderr


def test_gpu_affinity_shares_configured_gpus(instance_factory, tmp_path):
    conf = tmp_path / "gpus.toml"
    conf.write_text(f'[[resource.config]]\nhosts = "{os.uname().nodename}"\n'
                    'cores = "0-1"\ngpus = "0-3"\n')
    inst = instance_factory(1, conf=str(conf))
    show = ["printenv", "CUDA_VISIBLE_DEVICES"]
    run = ["run", "-N1", "-n2", "--gpus-per-node=4", "-l"]
    assert by_rank(inst.cli(*run, *show, check=True).stdout) == {0: "0,1,2,3", 1: "0,1,2,3"}
    assert by_rank(inst.cli(*run, "-o", "gpu-affinity=per-task", *show,
                            check=True).stdout) == {0: "0,1", 1: "2,3"}
    assert by_rank(inst.cli(*run, "-o", "gpu-affinity=map:3;1", *show,
                            check=True).stdout) == {0: "3", 1: "1"}
    assert by_rank(inst.cli("run", "-n2", "-g1", "-l", *show, check=True).stdout) == \
        {0: "0,1", 1: "0,1"}


def test_run_with_pty_shows_every_tasks_output(inst1):
    """-o pty (Flux's pty capture): the terminal's output is the job's, shown with the
    other tasks' (task 1's was lost: run showed task 0's terminal alone)."""
    cp = inst1.cli("run", "-n2", "-o", "pty", "-l", "sh", "-c",
                   "echo rank $FLUXLITE_TASK_RANK; tty >/dev/null && echo onpty")
    lines = sorted(line.rstrip("\r") for line in cp.stdout.splitlines())
    assert lines == ["0: onpty", "0: rank 0", "1: rank 1"], cp.stdout + cp.stderr
    cp = inst1.cli("run", "-o", "pty.interactive", "sh", "-c", "tty; exit 3")
    assert cp.returncode == 3 and cp.stdout.startswith("/dev/pts/"), cp.stderr
