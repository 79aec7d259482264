"""Flux's flux-start options, through the real CLI (`fluxlite start ...` as a
subprocess): -c/--config-path, -v/--verbose[=LEVEL], -X/--noexec, --wrap, --test-exit-timeout,
--test-exit-mode, --test-start-mode, --test-rundir-cleanup, --test-pmi-clique,
-r/--recovery and --sysconfig (doc/man1/flux-start.rst)."""

from __future__ import annotations

import os
import subprocess
import uuid

import pytest

from fluxlite.testing import TAG_VAR, assert_no_leaks, fluxlite_command, one_error_line

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def tag():
    """A tag every process of the test's instances carries; none may outlive the test."""
    value = uuid.uuid4().hex
    yield value
    assert_no_leaks(value)


def _env(tag: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PMI_") and k != "FLUXLITE_URI"}
    env[TAG_VAR] = tag
    bindir = os.path.dirname(fluxlite_command()[0])
    if os.path.exists(os.path.join(bindir, "fluxlite")):   # `fluxlite` in the program
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    return env


def start(tag: str, *args, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(fluxlite_command() + ["start", *map(str, args)], env=_env(tag),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout)


# ------------------------------------------------------------------ -c, --sysconfig
def test_c_is_config_path_and_conf_is_read_after_it(tag, tmp_path):
    confdir = tmp_path / "conf.d"
    confdir.mkdir()
    (confdir / "a.toml").write_text('[broker]\nshutdown-timeout = "7s"\n'
                                    'cleanup-timeout = "8s"\n')
    extra = tmp_path / "extra.toml"
    extra.write_text('[broker]\ncleanup-timeout = "9s"\n')
    cp = start(tag, "-c", confdir, "sh", "-c", "fluxlite getattr broker.shutdown-timeout")
    assert (cp.returncode, cp.stdout) == (0, "7s\n"), cp.stderr
    cp = start(tag, f"-c{confdir}", "--conf", extra, "sh", "-c",
               "fluxlite getattr broker.shutdown-timeout; "
               "fluxlite getattr broker.cleanup-timeout")
    assert (cp.returncode, cp.stdout) == (0, "7s\n9s\n"), cp.stderr
    # Flux: -c PATH is the same as -o,-cPATH
    cp = start(tag, f"-o,-c{confdir}", "fluxlite", "getattr", "broker.shutdown-timeout")
    assert (cp.returncode, cp.stdout) == (0, "7s\n"), cp.stderr


def test_conf_takes_fluxs_forms_after_the_config_path(tag, tmp_path):
    confdir = tmp_path / "conf.d"
    confdir.mkdir()
    (confdir / "a.toml").write_text('[broker]\nshutdown-timeout = "7s"\n')
    cp = start(tag, "-c", confdir, "--conf", "broker.shutdown-timeout=5s",
               "--conf", '[broker]\ncleanup-timeout = "6s"\n', "sh", "-c",
               "fluxlite getattr broker.shutdown-timeout; "
               "fluxlite getattr broker.cleanup-timeout; fluxlite getattr config.path")
    assert (cp.returncode, cp.stdout) == (0, f"5s\n6s\n{confdir}\n"), cp.stderr
    cp = start(tag, "--conf", "nosuchname", "true")
    assert "--conf: named config 'nosuchname' not found" in one_error_line(cp)


def test_sysconfig_reads_the_system_config_or_says_it_is_not_there(tag):
    path = "/etc/flux/system/conf.d"
    if os.path.isdir(path):
        pytest.skip(f"{path} exists here; the test checks the message for its absence")
    cp = start(tag, "--sysconfig", "true")
    assert one_error_line(cp) == (
        f"fluxlite start: --sysconfig: {path}: no such directory (this machine has no "
        "Flux system instance config; name one with -c PATH)")


# ------------------------------------------------------------------ -X, --wrap
def test_noexec_starts_nothing_and_with_v_prints_each_brokers_command(tag, tmp_path):
    ran = tmp_path / "ran"
    cp = start(tag, "-X", "-s2", "touch", ran)
    assert (cp.returncode, cp.stdout, cp.stderr) == (0, "", "")
    cp = start(tag, "-X", "-v", "-s2", "--rundir", tmp_path / "rd", "touch", ran)
    assert cp.returncode == 0, cp.stderr
    assert not ran.exists()
    lines = cp.stderr.splitlines()
    assert lines[0].startswith("fluxlite start: 2 brokers on this machine")
    rank0, rank1 = lines[1:]
    assert rank0.startswith("fluxlite start: 0: ") and rank1.startswith("fluxlite start: 1: ")
    for rank, line in enumerate((rank0, rank1)):
        assert f" -m fluxlite broker --rank={rank} --size=2 --rundir={tmp_path / 'rd'} " \
            in line
    assert rank0.endswith(f" -- touch {ran}") and " -- " not in rank1


@pytest.mark.parametrize("level", [["-vv"], ["--verbose=2"], ["-v2"], ["-v=2"],
                                   ["-v", "-v"]])
def test_verbose_takes_a_level_or_a_count(tag, tmp_path, level):
    """Flux's `-v, --verbose=[LEVEL]`: level 2 adds each attribute's line."""
    cp = start(tag, "-X", *level, "-Stbon.topo=kary:3", "true")
    assert cp.returncode == 0, cp.stderr
    assert "fluxlite start: tbon.topo=kary:3" in cp.stderr.splitlines()
    cp = start(tag, "-X", "--verbose=1", "true")
    assert cp.returncode == 0, cp.stderr
    assert "fluxlite start: 0: " in cp.stderr and "tbon.topo=" not in cp.stderr
    # a bare -v takes no value: the next word is the initial program
    ran = tmp_path / "ran"
    cp = start(tag, "-v", "touch", ran)
    assert (cp.returncode, ran.exists()) == (0, True), cp.stderr
    cp = start(tag, "-X", "--verbose=high", "true")
    assert cp.returncode != 0
    assert "LEVEL is a number" in one_error_line(cp)


def test_wrap_runs_each_broker_under_the_given_arguments(tag, tmp_path):
    log = tmp_path / "wrapped"
    wrapper = tmp_path / "wrapper"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {log}\nshift\n'
                       'WRAPPED=yes exec "$@"\n')
    wrapper.chmod(0o755)
    conf = tmp_path / "conf.toml"
    conf.write_text('[broker]\ncleanup-timeout = "8s"\n')
    cp = start(tag, "-s2", f"--wrap={wrapper},--marker", "--test-pmi-clique=per-broker",
               "-Sbroker.shutdown-timeout=7s", "-c", conf, "sh", "-c",
               "fluxlite getattr size; printenv WRAPPED; "
               "fluxlite getattr -r 1 broker.mapping; "
               "fluxlite getattr -r 1 broker.shutdown-timeout; "
               "fluxlite getattr -r 1 broker.cleanup-timeout; "
               "fluxlite getattr -r 1 config.path")
    assert (cp.returncode, cp.stdout) == (0, f"2\nyes\n[[0,2,1,1]]\n7s\n8s\n{conf}\n"), \
        cp.stderr
    lines = sorted(log.read_text().splitlines())
    assert len(lines) == 2, lines
    for rank, line in enumerate(lines):
        assert line.startswith("--marker ") and f"broker --rank={rank} --size=2 " in line


def test_under_a_pmi_launcher_noexec_prints_and_wrap_execs_the_broker(instance_factory,
                                                                      tmp_path):
    # Flux's normal mode: `start` is one broker of the launcher's; -v prints the command
    # that broker runs as, -X stops there, --wrap runs it under the wrapper
    inst = instance_factory(1)
    cp = inst.cli("run", "-n2", *fluxlite_command(), "start", "-X", "-v",
                  "-Stbon.topo=kary:1", "true", timeout=120)
    assert (cp.returncode, cp.stdout) == (0, ""), cp.stderr
    lines = cp.stderr.splitlines()
    assert len(lines) == 2, cp.stderr
    for line in lines:
        assert line.startswith("fluxlite start: ")
        assert line.endswith(" -m fluxlite start -Stbon.topo=kary:1 -- true"), line
    log = tmp_path / "wrapped"
    wrapper = tmp_path / "wrapper"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {log}\nshift\nWRAPPED=yes exec "$@"\n')
    wrapper.chmod(0o755)
    conf = tmp_path / "conf.toml"
    conf.write_text('[broker]\ncleanup-timeout = "8s"\n')
    cp = inst.cli("run", "-n2", *fluxlite_command(), "start", f"--wrap={wrapper},--marker",
                  "-c", conf, "sh", "-c", "fluxlite getattr size; printenv WRAPPED; "
                  "fluxlite getattr config.path", timeout=120)
    assert (cp.returncode, cp.stdout) == (0, f"2\nyes\n{conf}\n"), cp.stderr
    lines = log.read_text().splitlines()
    assert len(lines) == 2 and all(line.startswith("--marker ") for line in lines), lines


def test_wrap_with_a_command_that_is_not_there_is_one_error(tag):
    cp = start(tag, "--wrap=/nonexistent/valgrind,--tool=memcheck", "true")
    assert one_error_line(cp) == \
        "fluxlite start: --wrap: /nonexistent/valgrind: command not found"


# ------------------------------------------------------------------ exit timer
@pytest.mark.parametrize("option", ["--test-exit-timeout", "--killer-timeout"])
def test_exit_timeout_kills_a_broker_that_outlives_the_leader(tag, option):
    # rank 1 stopped: rank 0 gives up waiting for it at shutdown and exits; the exit
    # timer then kills rank 1 (--killer-timeout: Flux's older name, still taken)
    cp = start(tag, "-s2", f"{option}=0.2s", "-Sbroker.shutdown-timeout=0.5s",
               "sh", "-c", "kill -STOP $(fluxlite getattr -r 1 broker.pid)")
    assert cp.returncode == 0, cp.stderr
    assert "fluxlite start: exit timeout: killed rank 1" in cp.stderr.splitlines()


def test_exit_mode_any_ends_the_instance_when_any_broker_exits(tag):
    # rank 1 killed: in `any` mode the timer starts and kills rank 0; the exit code is
    # the highest of the brokers' (137, rank 1's SIGKILL)
    p = subprocess.Popen(fluxlite_command() + [
        "start", "-s2", "--test-exit-mode=any", "--test-exit-timeout=0.5s", "sh", "-c",
        "kill -9 $(fluxlite getattr -r 1 broker.pid); exec cat"],
        env=_env(tag), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        p.wait(timeout=120)  # stdin stays open: cat runs on
    finally:
        p.stdin.close()      # the initial program (rank 0 was killed under it) ends
        if p.poll() is None:
            p.kill()
            p.wait()
    err = p.stderr.read()
    p.stdout.close()
    p.stderr.close()
    assert p.returncode == 137, err
    assert "fluxlite start: exit timeout: killed rank 0" in err.splitlines()


# ------------------------------------------------------------------ start mode, rundir
def test_start_mode_leader_starts_rank_0_alone(tag):
    cp = start(tag, "-s3", "--test-start-mode=leader", "-Sbroker.quorum=1", "sh", "-c",
               "fluxlite getattr broker.quorum; fluxlite overlay status")
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    assert lines[0] == "1"
    assert [line.split()[-1] for line in lines[2:]] == ["offline", "offline"], cp.stdout


def test_quorum_larger_than_the_instance_is_one_error(tag):
    cp = start(tag, "-s2", "-Sbroker.quorum=3", "true")
    assert one_error_line(cp) == ("fluxlite start: invalid value for broker.quorum=3: "
                                  "this instance has 2 brokers")


def test_test_rundir_cleanup_removes_the_named_run_directory(tag, tmp_path):
    kept, removed = tmp_path / "kept", tmp_path / "removed"
    for d in (kept, removed):
        d.mkdir(mode=0o700)
    assert start(tag, "--test-rundir", kept, "true").returncode == 0
    cp = start(tag, "--test-rundir", removed, "--test-rundir-cleanup", "sh", "-c",
               'test -S "${FLUXLITE_URI#local://}"')
    assert cp.returncode == 0, cp.stderr     # the instance ran in it
    assert kept.is_dir() and not removed.exists()


# ------------------------------------------------------------------ pmi clique
@pytest.mark.parametrize("args,mapping", [
    ((), "[[0,1,2,1]]"),
    (("--test-pmi-clique=single",), "[[0,1,2,1]]"),
    (("--test-pmi-clique=per-broker",), "[[0,2,1,1]]"),
    (("--test-pmi-clique=[[0,1,1,2]]",), "[[0,1,1,2]]")])
def test_pmi_clique_is_the_broker_mapping(tag, args, mapping):
    cp = start(tag, "-s2", *args, "fluxlite", "getattr", "-r", "1", "broker.mapping")
    assert (cp.returncode, cp.stdout) == (0, mapping + "\n"), cp.stderr


def test_pmi_clique_none_leaves_the_mapping_unset_and_bad_ones_are_refused(tag):
    cp = start(tag, "--test-pmi-clique=none", "fluxlite", "getattr", "broker.mapping")
    assert cp.returncode == 1 and "'broker.mapping' is not set" in cp.stderr
    cp = start(tag, "-s2", "--test-pmi-clique=[[0,1,1,1]]", "true")
    assert one_error_line(cp) == ("fluxlite start: --test-pmi-clique=[[0,1,1,1]]: the "
                                  "taskmap places 1 broker, the instance has 2")
    cp = start(tag, "--test-pmi-clique=some", "true")
    assert "expected single, per-broker, none or an RFC 34 taskmap" in one_error_line(cp)


# ------------------------------------------------------------------ recovery
def test_recovery_on_a_state_directory_runs_rank_0_alone_and_keeps_changes(tag, tmp_path):
    statedir = tmp_path / "state"
    cp = start(tag, f"-Sstatedir={statedir}", "sh", "-c",
               "fluxlite kvs put a=1 && fluxlite submit true")
    assert cp.returncode == 0, cp.stderr
    jobid = cp.stdout.strip()
    cp = start(tag, "-s2", "-r", statedir, "sh", "-c",
               "fluxlite kvs get a; fluxlite jobs -a -n -o {id}; "
               "fluxlite getattr broker.recovery-mode; fluxlite overlay status | wc -l; "
               "fluxlite kvs put b=2")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.split() == ["1", jobid, "1", "2"]   # rank 1: offline
    assert "fluxlite recovery mode" in cp.stderr
    assert f"{statedir} (changes are kept)" in cp.stderr
    cp = start(tag, f"-Sstatedir={statedir}", "fluxlite", "kvs", "get", "b")
    assert (cp.returncode, cp.stdout) == (0, "2\n"), cp.stderr


def test_recovery_on_a_dump_archive_restores_a_copy(tag, tmp_path):
    dump = tmp_path / "dump.tar"
    cp = start(tag, "sh", "-c", f"fluxlite kvs put a=1 && fluxlite submit true && "
               f"fluxlite dump {dump}")
    assert cp.returncode == 0, cp.stderr
    jobid = cp.stdout.strip()
    cp = start(tag, f"--recovery={dump}", "sh", "-c",
               "fluxlite kvs get a; fluxlite jobs -a -n -o {id}; "
               'test -d "$(fluxlite getattr statedir)" && echo statedir')
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.split() == ["1", jobid, "statedir"]
    assert f"restored from {dump} (changes are not kept)" in cp.stderr


def test_recovery_targets_that_are_not_there_are_one_error(tag, tmp_path):
    cp = start(tag, "-r", tmp_path / "nothing", "true")
    assert one_error_line(cp) == \
        f"fluxlite start: --recovery: {tmp_path / 'nothing'}: No such file or directory"
    cp = start(tag, "-r", tmp_path, "true")
    assert one_error_line(cp).startswith(
        f"fluxlite start: --recovery: {tmp_path / 'content.sqlite'}: No such file")
    if not os.path.exists("/var/lib/flux"):
        cp = start(tag, "--recovery", "--", "true")
        assert one_error_line(cp) == \
            "fluxlite start: --recovery: /var/lib/flux: No such file or directory"
