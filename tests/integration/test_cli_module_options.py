"""flux-module(1) through the real CLI: remove/load/reload of a built-in module (the
scheduler pauses and resumes, knowing what running jobs hold), modules that refuse
to stop, Flux's errors for names and paths, stats, debug and trace."""

from __future__ import annotations

import json
import os
import select
import signal
import time

import pytest

pytestmark = pytest.mark.timeout(120)


def _state(inst, jobid: str) -> str:
    return inst.cli("jobs", "-n", "-o", "{state}", jobid, check=True).stdout.strip()


def _no_alloc_within(inst, jobid: str, seconds: str = "1") -> bool:
    """The job gets no `alloc` event within a short bound (wait-event times out)."""
    cp = inst.cli("job", "wait-event", "-t", seconds, jobid, "alloc")
    return cp.returncode != 0 and "alloc" not in cp.stdout


def test_remove_sched_pauses_scheduling_and_load_resumes_it(instance_factory):
    inst = instance_factory(1, cores_per_rank=1)
    holder = inst.cli("submit", "sleep", "300", check=True).stdout.strip()
    inst.cli("job", "wait-event", "-t", "30", holder, "start", check=True)

    inst.cli("module", "remove", "sched-simple", check=True)     # Flux's name for it
    listed = inst.cli("module", "list", check=True).stdout
    assert not any(line.split()[0] == "sched" for line in listed.splitlines()[1:])
    cp = inst.cli("module", "stats", "sched")                     # its requests: ENOSYS
    assert cp.returncode == 1 and len(cp.stderr.splitlines()) == 1
    assert "No service matching sched.stats-get" in cp.stderr

    waiting = inst.cli("submit", "true", check=True).stdout.strip()   # taken, waits
    assert _no_alloc_within(inst, waiting) and _state(inst, waiting) == "SCHED"

    # loaded again, the scheduler learns the running job holds the one core: the
    # waiting job still waits, and runs once the holder ends
    inst.cli("module", "load", "sched-simple", check=True)
    assert _no_alloc_within(inst, waiting) and _state(inst, waiting) == "SCHED"
    inst.cli("cancel", holder, check=True)
    inst.cli("job", "wait-event", "-t", "30", waiting, "clean", check=True)
    assert inst.cli("jobs", "-n", "-o", "{result}", waiting, check=True).stdout == "COMPLETED\n"

    # reload = remove + load; arguments a built-in module does not read are reported
    cp = inst.cli("module", "reload", "sched", "mode=limited=8", check=True)
    assert "arguments ignored" in cp.stderr and "mode=limited=8" in cp.stderr
    assert inst.cli("run", "echo", "after reload", check=True).stdout == "after reload\n"


def test_load_and_reload_take_fluxs_name_exec_and_loader_options(inst1):
    """flux-module load/reload -n NAME, --exec, --loader=PATH: taken (built-in
    modules run in the broker; a module path stays refused)."""
    inst1.cli("module", "remove", "sched-simple", check=True)
    inst1.cli("module", "load", "-n", "sched", "--exec", "sched-simple", check=True)
    inst1.cli("module", "reload", "--exec", "-n", "sched", "sched", check=True)
    assert inst1.cli("run", "echo", "scheduled", check=True).stdout == "scheduled\n"
    cp = inst1.cli("module", "load", "--loader=/bin/true", "/tmp/nosuch.so")
    assert cp.returncode == 1 and len(cp.stderr.splitlines()) == 1


def test_modules_holding_the_instance_refuse_to_stop(inst1):
    for name in ("job-manager", "kvs", "job-exec", "resource", "module"):
        cp = inst1.cli("module", "remove", name)
        assert cp.returncode == 1, name
        assert cp.stderr.startswith(f"fluxlite module remove: {name}: Device or resource "
                                    "busy: ")
        assert len(cp.stderr.splitlines()) == 1
        assert any(line.split()[0] == name
                   for line in inst1.cli("module", "list", check=True).stdout.splitlines())
    # a Flux module fluxlite serves within another is that one (kvs-watch: the kvs)
    cp = inst1.cli("module", "remove", "kvs-watch")
    assert cp.returncode == 1 and cp.stderr.startswith(
        "fluxlite module remove: kvs: Device or resource busy")
    # the instance goes on as before
    assert inst1.cli("run", "echo", "still here", check=True).stdout == "still here\n"


def test_load_and_remove_errors_are_flux_words(inst1):
    cases = [(("load", "kvs"), "kvs: File exists"),
             (("load", "sched"), "sched: File exists"),
             (("load", "nosuch"), "nosuch: No such file or directory"),
             (("load", "/tmp/nosuch/mod.so"), "/tmp/nosuch/mod.so: No such file or directory"),
             (("remove", "nosuch"), "nosuch: No such file or directory")]
    for args, words in cases:
        cp = inst1.cli("module", *args)
        assert cp.returncode == 1, args
        assert cp.stderr.startswith(f"fluxlite module {args[0]}: {words}"), cp.stderr
        assert len(cp.stderr.splitlines()) == 1
    assert inst1.cli("module", "remove", "-f", "nosuch").returncode == 0   # -f: ignored
    # a stateless module comes and goes
    inst1.cli("module", "remove", "log", check=True)
    assert inst1.cli("logger", "lost").returncode == 1
    inst1.cli("module", "load", "log", check=True)
    inst1.cli("logger", "logged again", check=True)


def test_stats_debug_and_rusage(inst1):
    inst1.cli("run", "true", check=True)
    stats = json.loads(inst1.cli("module", "stats", "sched", check=True).stdout)
    assert stats["#request (rx)"] >= 2 and stats["#response (tx)"] >= 2  # feasibility, alloc
    assert set(stats) >= {f"#{t} ({d})" for t in ("request", "response", "event", "control")
                          for d in ("tx", "rx")}
    assert (stats["pending"], stats["running"]) == (0, 0)      # the scheduler's own
    assert inst1.cli("module", "stats", "-p", "namespace.primary.store revision", "kvs",
                     check=True).stdout == inst1.cli("kvs", "version", check=True).stdout
    one = inst1.cli("module", "stats", "-p", "#request (rx)", "sched", check=True).stdout
    assert int(one) >= stats["#request (rx)"]
    assert inst1.cli("module", "stats", "-p", "#request (rx)", "-s", "0", "sched",
                     check=True).stdout == "0\n"
    assert inst1.cli("module", "stats", "-t", "double", "-p", "#event (rx)", "sched",
                     check=True).stdout == "0.000000\n"
    inst1.cli("module", "stats", "--clear", "sched", check=True)
    after = json.loads(inst1.cli("module", "stats", "sched", check=True).stdout)
    # counted since the clear: its own answer, and the stats-get asking now
    assert (after["#response (tx)"], after["#request (rx)"]) == (1, 1)
    ru = json.loads(inst1.cli("module", "stats", "-R", "kvs", check=True).stdout)
    assert ru["maxrss"] > 0 and "utime" in ru
    assert "maxrss" in json.loads(inst1.cli("module", "stats", "-Rchildren", "kvs",
                                            check=True).stdout)
    cp = inst1.cli("module", "stats", "-p", "nosuch", "sched")
    assert cp.returncode == 1 and "`nosuch' not found in response" in cp.stderr

    assert inst1.cli("module", "debug", "kvs", check=True).stdout == "0x0\n"
    assert inst1.cli("module", "debug", "-s", "0x4", "kvs", check=True).stdout == "0x4\n"
    assert inst1.cli("module", "debug", "-s", "1", "kvs", check=True).stdout == "0x5\n"
    assert inst1.cli("module", "debug", "-c", "4", "kvs", check=True).stdout == "0x1\n"
    assert inst1.cli("module", "debug", "-S", "0x30", "kvs", check=True).stdout == "0x30\n"
    assert inst1.cli("module", "debug", "-C", "kvs", check=True).stdout == "0x0\n"
    cp = inst1.cli("module", "debug", "-S", "lots", "kvs")
    assert cp.returncode == 1 and len(cp.stderr.splitlines()) == 1 and "lots" in cp.stderr


def test_trace_prints_messages_until_interrupted(inst1):
    with inst1.cli_background("module", "trace", "-t", "request,response", "sched") as p:
        seen = ""
        deadline = time.monotonic() + 30
        while "sched.stats-get" not in seen and time.monotonic() < deadline:
            inst1.cli("module", "stats", "sched", check=True)   # traffic for sched
            if select.select([p.stdout], [], [], 0.5)[0]:
                seen += os.read(p.stdout.fileno(), 65536).decode()
        assert " sched rx > sched.stats-get [" in seen, seen
        inst1.cli("run", "true", check=True)
        while "sched.alloc" not in seen and time.monotonic() < deadline:
            if select.select([p.stdout], [], [], 1)[0]:
                seen += os.read(p.stdout.fileno(), 65536).decode()
        assert " sched tx < sched.alloc [" in seen and " success" in seen, seen
        p.send_signal(signal.SIGINT)
        assert p.wait(timeout=30) == 0

    bad = inst1.cli("module", "trace", "-t", "bogus", "sched")
    assert bad.returncode == 1 and bad.stderr == \
        "fluxlite module trace: valid types: request, response, event, control\n"
    gone = inst1.cli("module", "trace", "nosuch")
    assert gone.returncode == 1 and "nosuch: No such file or directory" in gone.stderr
