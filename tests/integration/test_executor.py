"""fluxlite.jobapi.Executor against a real instance: many jobs, exit statuses,
cancel, attach, event callbacks, shutdown, and no thread left behind."""

import concurrent.futures
import threading

import pytest

from fluxlite.errors import JobException
from fluxlite.job import Jobspec
from fluxlite.jobapi import Executor, api

pytestmark = pytest.mark.timeout(120)

WAIT = 60  # seconds any one bounded wait may take


def cmd(*argv, **kw):
    return Jobspec.from_command(list(argv), **kw)


def executor_threads():
    return [t for t in threading.enumerate() if t.name == "fluxlite-executor"]


@pytest.fixture
def inst(instance_factory):
    inst = instance_factory(1, cores_per_rank=4)
    yield inst
    assert not executor_threads(), "an executor thread outlived its test"


def test_fifty_jobs_complete_with_their_exit_codes(inst):
    with Executor(inst.uri) as ex:
        futs = [ex.submit(cmd("sh", "-c", f"exit {i % 5}")) for i in range(50)]
        done, not_done = concurrent.futures.wait(futs, timeout=WAIT)
        assert not not_done
        assert [f.result() for f in futs] == [i % 5 for i in range(50)]
        ids = {f.jobid() for f in futs}
        assert len(ids) == 50 and all(isinstance(i, int) and i > 0 for i in ids)


def test_two_hundred_futures_at_once(inst):
    with Executor(inst.uri) as ex:
        futs = [ex.submit(cmd("true")) for _ in range(200)]
        done, not_done = concurrent.futures.wait(futs, timeout=WAIT * 2)
        assert not not_done
        assert [f.result() for f in futs] == [0] * 200
        assert len({f.jobid() for f in futs}) == 200


def test_cancel_a_pending_job(inst):
    """A job that waits for cores (the instance's 4 are taken) is canceled before it
    starts: its future raises the cancel exception, and it never ran."""
    with Executor(inst.uri) as ex:
        hog = ex.submit(cmd("sleep", "60", num_tasks=4))
        started = threading.Event()
        hog.add_event_callback("start", lambda f, e: started.set())
        assert started.wait(WAIT)
        pending = ex.submit(cmd("true"))
        ran = threading.Event()
        pending.add_event_callback("start", lambda f, e: ran.set())
        pending.jobid(timeout=WAIT)
        assert pending.cancel()
        exc = pending.exception(timeout=WAIT)
        assert isinstance(exc, JobException) and exc.etype == "cancel"
        assert not ran.is_set()
        assert hog.cancel()
        assert isinstance(hog.exception(timeout=WAIT), JobException)


def test_failing_command_and_signal(inst):
    with Executor(inst.uri) as ex:
        fail = ex.submit(cmd("sh", "-c", "exit 3"))
        killed = ex.submit(cmd("sh", "-c", "kill -TERM $$"))
        missing = ex.submit(cmd("/nonexistent/program"))
        assert fail.result(timeout=WAIT) == 3
        # as in Flux, a task killed by a signal is exit code 128+N in the finish
        # status (only a job shell killed by one makes it -N)
        assert killed.result(timeout=WAIT) == 128 + 15
        # a command that cannot be started is an exec exception, as in Flux
        exc = missing.exception(timeout=WAIT)
        assert isinstance(exc, JobException) and exc.etype == "exec"
        assert "No such file or directory" in str(exc)


def test_a_job_that_cannot_be_submitted_fails_its_future(inst):
    spec = cmd("true")
    spec.setattr_shell_option("exit-timeout", "bogus")
    with Executor(inst.uri) as ex:
        fut = ex.submit(spec)
        exc = fut.exception(timeout=WAIT)
        assert "invalid shell option exit-timeout" in str(exc)
        with pytest.raises(RuntimeError, match="could not be submitted"):
            fut.jobid(timeout=WAIT)


def test_cancel_a_running_job(inst):
    with Executor(inst.uri) as ex:
        fut = ex.submit(cmd("sleep", "60"))
        started = threading.Event()
        fut.add_event_callback("start", lambda f, e: started.set())
        assert started.wait(WAIT)
        assert fut.cancel()
        exc = fut.exception(timeout=WAIT)
        assert isinstance(exc, JobException) and exc.etype == "cancel"
        assert exc.jobid == fut.jobid()


def test_a_job_with_a_fatal_exception_raises_jobexception(inst):
    with Executor(inst.uri) as ex:
        fut = ex.submit(cmd("sleep", "60", duration=0.5))
        with pytest.raises(JobException) as info:
            fut.result(timeout=WAIT)
        assert info.value.etype == "timeout"


def test_attach_to_running_and_finished_jobs(inst):
    with _handle(inst) as h:
        done_id = api.submit(h, cmd("sh", "-c", "exit 4").jobspec)
        api.wait(h, done_id, timeout=WAIT)
        live_id = api.submit(h, cmd("sh", "-c", "sleep 0.5; exit 2").jobspec)
    with Executor(inst.uri) as ex:
        old, live = ex.attach(done_id), ex.attach(live_id)
        assert old.jobid(timeout=WAIT) == done_id
        assert old.result(timeout=WAIT) == 4
        assert live.result(timeout=WAIT) == 2
        bogus = ex.attach(123456789)
        with pytest.raises(ValueError, match="does not match any job"):
            bogus.result(timeout=WAIT)


def _handle(inst):
    from fluxlite.client.sync import Handle
    return Handle(inst.uri)


def test_callbacks_see_jobid_then_events_then_done(inst):
    order = []
    lock = threading.Lock()

    def note(what):
        with lock:
            order.append(what)

    with Executor(inst.uri) as ex:
        fut = ex.submit(cmd("true"))
        fut.add_jobid_callback(lambda f: note("jobid"))
        for name in ("submit", "start", "finish", "clean"):
            fut.add_event_callback(name, lambda f, e: note(e.name))
        fut.add_done_callback(lambda f: note("done"))
        assert fut.result(timeout=WAIT) == 0
    # shutdown waited for the log's end, so every callback has run
    assert order.index("jobid") < order.index("submit") < order.index("start") \
        < order.index("finish") < order.index("done")
    assert "clean" in order
    with pytest.raises(ValueError, match="not a main eventlog event"):
        fut.add_event_callback("bogus", lambda f, e: None)


def test_waiting_inside_a_callback_is_an_error(inst):
    seen = []
    with Executor(inst.uri) as ex:
        fut = ex.submit(cmd("true"))

        def cb(f, e):
            try:
                f.result()
            except RuntimeError as exc:
                seen.append(str(exc))
        fut.add_event_callback("start", cb)
        fut.result(timeout=WAIT)
    assert seen and "inside its callback" in seen[0]


def test_shutdown_cancel_futures_cancels_jobs_not_started(instance_factory):
    inst = instance_factory(1, cores_per_rank=1)
    ex = Executor(inst.uri)
    running = ex.submit(cmd("sleep", "1"))
    started = threading.Event()
    running.add_event_callback("start", lambda f, e: started.set())
    assert started.wait(WAIT)
    pending = [ex.submit(cmd("sleep", "60")) for _ in range(5)]
    for f in pending:
        f.jobid(timeout=WAIT)
    ex.shutdown(wait=True, cancel_futures=True)
    assert running.result() == 0
    for f in pending:
        assert isinstance(f.exception(), JobException) and f.exception().etype == "cancel"
    assert not executor_threads()
    with pytest.raises(RuntimeError, match="shut down"):
        ex.submit(cmd("true"))


def test_no_thread_left_after_shutdown(inst):
    before = set(threading.enumerate())
    ex = Executor(inst.uri)
    assert len(executor_threads()) == 1
    assert ex.submit(cmd("true")).result(timeout=WAIT) == 0
    ex.shutdown()
    assert set(threading.enumerate()) <= before


def test_a_wrong_uri_fails_at_once(tmp_path):
    with pytest.raises(Exception, match="no instance"):
        Executor(f"local://{tmp_path}/nothing")
    assert not executor_threads()
