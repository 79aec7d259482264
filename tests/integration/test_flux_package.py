"""fluxlite's `flux` Python package, call by call, as Flux's bindings define them
(src/bindings/python/flux/job/): each program runs with `fluxlite compat env` on."""

import subprocess

import pytest

from fluxlite.testing import fluxlite_command

pytestmark = pytest.mark.timeout(120)

COMPAT = 'eval "$(fluxlite compat env)" && '


@pytest.fixture
def inst(instance_factory):
    return instance_factory(1, cores_per_rank=4)


def run_program(inst, tmp_path, text, timeout=90):
    prog = tmp_path / "prog.py"
    prog.write_text(text)
    python = fluxlite_command()[0].rsplit("/", 1)[0] + "/python"
    cp = subprocess.run(["sh", "-c", COMPAT + f"{python} {prog}"], env=inst.env,
                        capture_output=True, text=True, timeout=timeout)
    assert cp.returncode == 0, cp.stderr
    return cp.stdout.splitlines()


JOURNAL_PROGRAM = r'''
import flux, flux.job
from flux.job import JobspecV1, JournalConsumer

h = flux.Flux()
old = flux.job.submit(h, JobspecV1.from_command(["true"]))
flux.job.wait(h, old)
c = JournalConsumer(h, include_sentinel=True).start()
history = []
while True:
    e = c.poll(timeout=60)
    if e.is_empty():
        break
    history.append(e)
print("history", [e.name for e in history][0], [e.name for e in history][-1],
      all(e.jobid == old for e in history), e is JournalConsumer.SENTINEL_EVENT)
print("submit", history[0].jobspec["tasks"][0]["command"], "userid" in history[0].context)
new = flux.job.submit(h, JobspecV1.from_command(["sh", "-c", "exit 2"]))
live = []
while not live or live[-1].name != "clean":
    live.append(c.poll(timeout=60))
print("live", all(e.jobid == new for e in live), [e.name for e in live][:2],
      live[0].timestamp <= live[-1].timestamp, bool(next(e for e in live if e.name == "alloc").R))
print("str", str(live[0]).startswith(new.f58 + ":"))
try:
    c.poll(timeout=0.2)
except TimeoutError:
    print("timeout")
c.stop()
print("stopped", c.poll(timeout=60))
try:
    JournalConsumer(h).poll()
except RuntimeError as exc:
    print("unstarted", exc)
try:
    c.set_callback(print)
except NotImplementedError as exc:
    print("missing", str(exc).split(":")[0])
'''


def test_journal_consumer_history_sentinel_live_timeout_stop(inst, tmp_path):
    assert run_program(inst, tmp_path, JOURNAL_PROGRAM) == [
        "history submit clean True True",
        "submit ['true'] True",
        "live True ['submit', 'validate'] True True",
        "str True",
        "timeout",
        "stopped None",
        "unstarted poll() called before start()",
        "missing flux.job.JournalConsumer.set_callback",
    ]
