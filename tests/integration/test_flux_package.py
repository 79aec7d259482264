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
    ]


JOBSPEC_PROGRAM = r'''
import datetime, json, os, pathlib
import flux, flux.job
from flux.job import JobspecV1

h = flux.Flux()
s = JobspecV1.from_command(["sh", "-c", "echo out; echo err >&2; cat"], num_tasks=2,
                           cores_per_task=1, duration="1m", environment={"A": "1"},
                           cwd=pathlib.Path("/tmp"), name="named", output="kvs")
print("from_command", s.duration, s.environment, s.cwd, s.getattr("system.job.name"),
      s.stdout, type(s).__name__)
s.cwd = os.getcwd(); s.environment = dict(os.environ, B="2")
s.duration = datetime.timedelta(seconds=30)
s.input = "in.txt"; s.output = "out.{{id}}"; s.error = "err.{{id}}"
print("setters", s.duration, s.environment["B"], s.stdin == s.input == os.path.abspath("in.txt"),
      s.stdout, s.output, s.stderr, s.error)
s.stdin = "in.txt"; s.stdout = "o.txt"; s.stderr = "e.txt"
pathlib.Path("in.txt").write_text("from stdin\n")
s.setattr("user.tag", "t1"); s.setattr("attributes.user.more", 2)
s.setattr_shell_option("exit-timeout", "none")
print("attrs", s.getattr("user.tag"), s.attributes["user"]["more"],
      s.getattr("system.shell.options")["exit-timeout"])
jobid = flux.job.submit(h, s)
print("ran", flux.job.wait(h, jobid).success, sorted(pathlib.Path("o.txt").read_text().split()),
      pathlib.Path("e.txt").read_text().split())
raw = JobspecV1.from_command(["true"]).jobspec
again = JobspecV1(**json.loads(json.dumps(raw)))
print("ctor", again.version, again.tasks[0]["command"],
      flux.job.wait(h, flux.job.submit(h, again)).success)
again = JobspecV1(resources=raw["resources"], tasks=raw["tasks"],
                  attributes=raw["attributes"], version=1)
print("ctor-kw", type(again).__name__, again.resources == raw["resources"])
try:
    JobspecV1(raw["resources"], raw["tasks"], raw["attributes"], version=2)
except ValueError as exc:
    print("version", exc)
nest = JobspecV1.from_nest_command(["fluxlite", "getattr", "size"], num_slots=1)
print("nest", nest.getattr("system.shell.options")["instance"], type(nest).__name__)
batch = JobspecV1.from_batch_command("#!/bin/sh\nflux getattr size\n", "myjob", num_slots=1)
print("batch", batch.getattr("system.job.name"), batch.getattr("system.batch.script")[:2])
bid = flux.job.submit(h, batch)
print("batch ran", flux.job.wait(h, bid).success)
for call in (lambda: JobspecV1.from_command(["true"]).add_file("a", "b"),
             lambda: JobspecV1.per_resource(["true"], ncores=1)):
    try:
        call()
    except NotImplementedError as exc:
        print("missing", str(exc).split(":")[0])
'''


def test_jobspecv1_factories_setters_and_constructor(inst, tmp_path):
    assert run_program(inst, tmp_path, f"import os; os.chdir({str(tmp_path)!r})\n"
                       + JOBSPEC_PROGRAM) == [
        "from_command 60.0 {'A': '1'} /tmp named None JobspecV1",
        "setters 30.0 2 True out.{{id}} out.{{id}} err.{{id}} err.{{id}}",
        "attrs t1 2 none",
        "ran True ['from', 'from', 'out', 'out', 'stdin', 'stdin'] ['err', 'err']",
        "ctor 1 ['true'] True",
        "ctor-kw JobspecV1 True",
        "version version must be 1",
        "nest 1 JobspecV1",
        "batch myjob #!",
        "batch ran True",
        "missing flux.job.JobspecV1.add_file",
        "missing flux.job.JobspecV1.per_resource",
    ]


EXECUTOR_PROGRAM = r'''
import errno, os, threading
import flux, flux.job
from flux.job import FluxExecutor, JobspecV1

uri = os.environ["FLUXLITE_URI"]
order, done = [], threading.Event()
with FluxExecutor(handle_args=(uri,)) as ex:
    fut = ex.submit(JobspecV1.from_command(["sh", "-c", "exit 4"]))
    fut.add_jobid_callback(lambda f: order.append(("jobid", f.jobid())))
    for name in ("submit", "start", "finish"):
        fut.add_event_callback(name, lambda f, e: order.append((e.name, f.jobid())))
    fut.add_done_callback(lambda f: (order.append(("done", f.result())), done.set()))
    jobid = fut.jobid(timeout=60)
    print("result", fut.result(timeout=60), done.wait(60), isinstance(jobid, int))
    print("order", [o[0] for o in order], {o[1] for o in order[:-1]} == {jobid})
with FluxExecutor(handle_kwargs={"url": uri}) as ex:
    h = flux.Flux()
    other = flux.job.submit(h, JobspecV1.from_command(["sh", "-c", "exit 5"]))
    att = ex.attach(other)
    print("attach", att.jobid(timeout=60) == other, att.result(timeout=60))
try:
    FluxExecutor(handle_kwargs={"flags": 1})
except OSError as exc:      # each worker opens flux.Flux(**handle_kwargs)
    print("no flags", exc.errno == errno.ENOSYS, str(exc).split(":")[0])
'''


def test_flux_executor_handle_args_callbacks_and_attach(inst, tmp_path):
    assert run_program(inst, tmp_path, EXECUTOR_PROGRAM) == [
        "result 4 True True",
        "order ['jobid', 'submit', 'start', 'finish', 'done'] True",
        "attach True 5",
        "no flags True flux.Flux(flags=...)",
    ]


MAESTRO_PROGRAM = r'''
# the calls Maestro's flux adapter (maestrowf/interfaces/script/_flux/flux0_49_0.py) makes
import os
import flux

h = flux.Flux()
print("version", bool(h.attr_get("version")))
spec = flux.job.JobspecV1.from_command(["sh", "-c", "echo hi"], num_tasks=1, num_nodes=1,
                                       cores_per_task=1, gpus_per_task=0, exclusive=False,
                                       queue=None, bank=None)
spec.setattr("system.job.name", "step")
spec.cwd = os.getcwd()
spec.environment = dict(os.environ)
spec.setattr_shell_option("exit-timeout", "none")
spec.duration = 60
spec.stdout = "step.{{id}}.out"
spec.stderr = "step.{{id}}.err"
nest = flux.job.JobspecV1.from_nest_command(["true"], num_nodes=1, cores_per_slot=1,
                                            num_slots=1, gpus_per_slot=None, conf=None,
                                            exclusive=False, queue=None, bank=None)
jobid = flux.job.submit(h, spec, waitable=True, urgency=16)
flux.job.wait(h, jobid)
rpc = flux.job.list.JobList(h, ids=[flux.job.JobID(str(jobid.f58))])
print("statuses", {str(j.id.f58) == jobid.f58: j.status_abbrev for j in rpc.jobs()}, rpc.errors)
print("nodelist", [j.nodelist for j in rpc.jobs()] == [h.attr_get("hostname")])
print("output", open(f"step.{jobid.f58}.out").read().strip())
long = flux.job.submit(h, flux.job.JobspecV1.from_command(["sleep", "60"]))
for job in flux.job.list.JobList(h, ids=[long]).jobs():
    flux.job.cancel(h, int(job.id))
flux.job.wait(h, long)
print("cancelled", [j.status_abbrev for j in flux.job.list.JobList(h, ids=[long]).jobs()])
'''


def test_the_calls_maestros_flux_adapter_makes(inst, tmp_path):
    assert run_program(inst, tmp_path, f"import os; os.chdir({str(tmp_path)!r})\n"
                       + MAESTRO_PROGRAM) == [
        "version True",
        "statuses {True: 'CD'} []",
        "nodelist True",
        "output hi",
        "cancelled ['CA']",
    ]


RADICAL_PROGRAM = r'''
# the pattern of radical.utils' flux helper (radical/utils/flux/flux_helper_v1.py): a
# thread follows the journal on its own handle while another submits
import os, threading
import flux, flux.job

uri = os.environ["FLUXLITE_URI"]
print("mode", "JournalConsumer" in dir(flux.job))
events, stop, seen = {}, threading.Event(), threading.Event()
lock = threading.Lock()

def jwatcher():
    fh = flux.Flux(uri)
    journal = flux.job.JournalConsumer(fh)
    journal.start()
    while not stop.is_set():
        try:
            event = journal.poll(timeout=1.0)
            if event:
                with lock:
                    events.setdefault(event.jobid, []).append(event.name)
                    done = [j for j, names in events.items() if "clean" in names]
                if len(done) >= 3:
                    seen.set()
        except TimeoutError:
            pass
    journal.stop()
    fh.close()

t = threading.Thread(target=jwatcher)
t.start()
fh = flux.Flux(uri)
specs = []
for i in range(3):
    spec = flux.job.JobspecV1(
        resources=[{"count": 2, "type": "slot", "label": "task",
                    "with": [{"count": 1, "type": "core"}]}],
        attributes={"system": {"duration": 0.0, "cwd": os.getcwd(),
                               "environment": dict(os.environ)},
                    "user": {"uid": f"task.{i}"}},
        tasks=[{"command": ["sh", "-c", f"exit {i}"], "slot": "task", "count": {"per_slot": 1}}],
        version=1)
    spec.setattr_shell_option("exit-on-error", 1)
    specs.append(spec)
futs = [flux.job.submit_async(fh, s, waitable=True) for s in specs]
ids = [f.get_id() for f in futs]
for fid in ids:
    flux.job.wait(fh, fid)
print("seen", seen.wait(60))
stop.set()
t.join(30)
print("joined", not t.is_alive())
with lock:
    print("events", [events[fid][0] for fid in ids], [events[fid][-1] for fid in ids],
          [fid in events for fid in ids])
long = flux.job.submit_async(fh, flux.job.JobspecV1.from_command(["sleep", "60"])).get_id()
flux.job.event_wait(fh, long, "start")
flux.job.cancel_async(fh, long, reason="user cancel").get()
print("cancel", flux.job.wait(fh, long).success)
'''


def test_the_pattern_of_radicals_flux_helper(inst, tmp_path):
    assert run_program(inst, tmp_path, RADICAL_PROGRAM) == [
        "mode True",
        "seen True",
        "joined True",
        "events ['submit', 'submit', 'submit'] ['clean', 'clean', 'clean'] [True, True, True]",
        "cancel False",
    ]


HANDLE_PROGRAM = r'''
import errno, os, signal
import flux, flux.constants
from flux.future import FutureExt

h = flux.Flux()
r = h.rpc(b"broker.ping", {"seq": 7, "pad": "x"}).get()
print("ping", r["seq"], r["pad"])
h.attr_set("user.color", "blue")
print("attr", h.attr_get("user.color"), h.get_rank(), h.get_size())
h.attr_remove("user.color")
for call in (lambda: h.attr_get("user.color"), lambda: h.attr_set("rank", "3"),
             lambda: h.rpc("no-such-service.hello").get()):
    try:
        call()
    except OSError as exc:
        print("oserror", errno.errorcode[exc.errno])
h.log(6, "hello from python")
print("job-list", h.rpc("job-list.list", {"max_entries": 5}).get())

ran = []
def then_cb(fut, tag):
    ran.append((tag, fut.get()["seq"]))
    fut.get_flux().reactor_stop()
h.rpc("broker.ping", {"seq": 3}).then(then_cb, "a")
print("reactor", h.reactor_run(), ran)
try:
    f = h.rpc("broker.ping"); f.then(lambda f: None); f.then(lambda f: None)
except OSError as exc:
    print("double then", errno.errorcode[exc.errno])

def service_cb(fh, mtype, msg, arg):
    for i in range(msg.payload["n"]):
        fh.respond(msg, {"i": i})
h.service_register("pyecho").get()
w = h.msg_watcher_create(service_cb, flux.constants.FLUX_MSGTYPE_REQUEST, "pyecho.many")
w.start()
got = []
def stream_cb(fut):
    got.append(fut.get()["i"])
    fut.reset()
    if len(got) == 3:
        fut.get_flux().reactor_stop()
h.rpc("pyecho.many", {"n": 3}, flags=flux.constants.FLUX_RPC_STREAMING).then(stream_cb)
h.reactor_run()
print("stream", got)
w.stop()

ticks = []
def tick(fh, watcher, revents, arg):
    ticks.append(1)
    if len(ticks) == 3:
        fh.reactor_stop()
h.timer_watcher_create(0.0, tick, repeat=0.01).start()
h.reactor_run()
print("timer", len(ticks))
def on_sig(fh, watcher, signum, arg):
    print("signal", signum == signal.SIGUSR1)
    fh.reactor_stop()
with h.signal_watcher_create(signal.SIGUSR1, on_sig):
    h.timer_watcher_create(0.01, lambda fh, *a: os.kill(os.getpid(), signal.SIGUSR1)).start()
    h.reactor_run()
def boom(fh, *a):
    raise RuntimeError("from a callback")
h.timer_watcher_create(0.0, boom).start()
try:
    h.reactor_run()
except RuntimeError as exc:
    print("raised", exc)

fut = FutureExt(lambda f: f.fulfill({"v": 1}), flux_handle=h)
print("ext", fut.get())
fut.reset()
fut.fulfill_error(errno.EINVAL, "bad")
try:
    fut.get()
except OSError as exc:
    print("ext error", errno.errorcode[exc.errno], exc.strerror)
h.event_subscribe("pytest.ev")
h.event_send("pytest.ev", {"k": 1})
ev = h.event_recv()
print("event", ev.topic, ev.payload)
h.event_unsubscribe("pytest.ev")
try:
    h.event_unsubscribe("pytest.ev")
except OSError as exc:
    print("unsubscribed", errno.errorcode[exc.errno])
'''


def test_handle_futures_watchers_and_any_topic(inst, tmp_path):
    """flux.Flux as flux-core's t/python handle, futures and watchers tests use it:
    rpc reaches any service (broker.ping, attr.*, job-list.*, a Python service),
    errors are OSError with Flux's errno, then-callbacks and watchers run from the
    reactor, and a callback's exception comes out of reactor_run."""
    out = run_program(inst, tmp_path, HANDLE_PROGRAM)
    assert out == [
        "ping 7 x", "attr blue 0 1",
        "oserror ENOENT", "oserror EINVAL", "oserror ENOSYS",
        "job-list {'jobs': []}",
        "reactor 0 [('a', 3)]", "double then EEXIST",
        "stream [0, 1, 2]", "timer 3", "signal True", "raised from a callback",
        "ext {'v': 1}", "ext error EINVAL bad",
        "event pytest.ev {'k': 1}", "unsubscribed ENOENT",
    ]


JOB_API_PROGRAM = r'''
import concurrent.futures as cf
import errno
import flux, flux.constants, flux.job
from flux.job import FluxExecutor, FluxExecutorFuture, JobException, JobID, JobspecV1

h = flux.Flux()
print("hex", JobID(0).hex, JobID(255).hex)
print("words", JobID(2**64 - 1).words, JobID("academy-academy-academy--academy-academy-academy"))
print("emoji", JobID(65535).emoji, JobID("💁📚") == 65535, JobID(2**64 - 1).emoji)
print("orig", JobID(JobID("1234")).orig, JobID(7).encode("hex"))
ok = flux.job.submit(h, JobspecV1.from_command(["true"]))
flux.job.wait(h, ok)
bad = flux.job.submit(h, JobspecV1.from_command(["sh", "-c", "exit 3"]))  # inactive last
flux.job.wait(h, bad)
jobs = flux.job.job_list(h, attrs=["userid"]).get_jobs()
print("attrs", sorted(jobs[0]), len(jobs))
inactive = flux.job.job_list_inactive(h, 0.0, 1).get_jobs()
print("newest first", inactive[0]["id"] == bad)
failed = flux.job.job_list(h, results=flux.constants.FLUX_JOB_RESULT_FAILED).get_jobs()
print("failed", [j["id"] == bad for j in failed])
info = flux.job.job_list_id(h, bad).get_jobinfo()
print("info", info.status_abbrev, info.returncode, info.result, info.state)
try:
    flux.job.job_list_id(h, 123456789).get_jobinfo()
except FileNotFoundError as exc:
    print("unknown", errno.errorcode[exc.errno])
try:
    h.rpc("job-list.list", {"constraint": {"color": ["red"]}}).get()
except OSError as exc:
    print("constraint", errno.errorcode[exc.errno])

names = []
def on_event(fut, arg):
    ev = fut.get_event(autoreset=False)
    if ev is None:
        fut.get_flux().reactor_stop()
        return
    names.append(ev.name)
    fut.reset()
flux.job.event_watch_async(h, ok).then(on_event, None)
h.reactor_run()
print("watch", names[0], names[-1], isinstance(flux.job.event_wait(h, ok, "start"), dict))

with FluxExecutor() as ex:
    fut = ex.submit(JobspecV1.from_command(["sleep", "60"]))
    started = cf.Future()
    fut.add_event_callback("start", lambda f, e: started.set_result(e))
    print("event is dict", isinstance(started.result(timeout=60), dict),
          isinstance(fut, FluxExecutorFuture))
    print("cancel running", fut.cancel())
    flux.job.cancel(h, fut.jobid(), "enough")
    exc = fut.exception(timeout=60)
    print("exception", isinstance(exc, JobException), str(exc))
'''


def test_job_list_topics_event_futures_and_executor_semantics(inst, tmp_path):
    """job-list.* answered by the job manager in Flux's shape, JobInfo, the eventlog
    watch future on the reactor, and FluxExecutorFuture's Flux semantics."""
    out = run_program(inst, tmp_path, JOB_API_PROGRAM)
    assert out == [
        "hex 0x0 0xff",
        "words natural-analyze-verbal--natural-analyze-verbal ƒ1",
        "emoji 💁📚 True 🚹💗💧👗😷📷📚",
        "orig 1234 0x7",
        "attrs ['id', 'userid'] 2",
        "newest first True",
        "failed [True]",
        "info F 3 FAILED INACTIVE",
        "unknown ENOENT",
        "constraint EINVAL",
        "watch submit clean True",
        "event is dict True True",
        "cancel running False",
        "exception True job.exception: type=cancel: enough",
    ]


KVS_PROGRAM = r'''
import errno
import flux, flux.kvs

h = flux.Flux()
flux.kvs.put(h, "app.n", 3)
flux.kvs.put(h, "app.raw", b"\xff\x00", raw=True)
flux.kvs.put(h, "app.text", "not json", raw=True)
flux.kvs.put_mkdir(h, "app.empty")
flux.kvs.commit(h)
print("get", flux.kvs.get(h, "app.n"), flux.kvs.get(h, "app.raw"), flux.kvs.get(h, "app.text"))
print("kinds", flux.kvs.isdir(h, "app.empty"), flux.kvs.exists(h, "app.nope"),
      flux.kvs.isdir(h, "app.n"))
with flux.kvs.get_dir(h, "app") as d:
    d["sub.x"] = {"k": [1]}
    del d["n"]
print("dir", sorted(d), d.list_all(), flux.kvs.get(h, "app")["sub"]["x"])
print("walk", [(p, sorted(ds), sorted(fs)) for p, ds, fs in flux.kvs.walk("app", flux_handle=h)])
txn = flux.kvs.KVSTxn(h, "app")
txn.put("y", 1)
txn.put("sub", 2)      # a value over a directory replaces it, as in Flux
txn.put("text.below", 3)   # and a key below a value makes it a directory
txn.commit()
print("replaced", flux.kvs.get(h, "app.sub"), flux.kvs.get(h, "app.text.below"),
      flux.kvs.exists(h, "app.y"))
flux.kvs.put_symlink(h, "app.link", "app.sub")
flux.kvs.put_symlink(h, "app.nowhere", "app.none")
flux.kvs.commit(h)
print("links", flux.kvs.get(h, "app.link"), flux.kvs.exists(h, "app.nowhere"))
flux.kvs.namespace_create(h, "other")
flux.kvs.put(h, "only.here", 7)
flux.kvs.commit(h, namespace="other")
txn = flux.kvs.KVSTxn(h, "only", namespace="other")
txn.put("also", [1])
txn.commit()
d = flux.kvs.get_dir(h, "only", namespace="other")
print("namespaces", flux.kvs.namespace_list(h), sorted(d.files()),
      flux.kvs.get(h, "only.here", namespace="other"),
      flux.kvs.exists(h, "only.here"), flux.kvs.isdir(h, "only", namespace="other"))
with flux.kvs.get_dir(h, namespace="other") as kd:
    kd.mkdir("filled", {"a": 1})
print("filled", flux.kvs.get(h, "filled.a", namespace="other"), flux.kvs.exists(h, "filled"))
flux.kvs.namespace_remove(h, "other")
try:
    flux.kvs.get(h, "only.here", namespace="other")
except OSError as exc:
    print("removed", errno.errorcode[exc.errno], flux.kvs.namespace_list(h))
'''


def test_kvs_api_stages_commits_and_reads_as_flux(inst, tmp_path):
    """flux.kvs over the kvs service: staged puts, raw values decoded as Flux does,
    empty directories (kvs mkdir), KVSDir, walk, and a failed commit applying
    nothing."""
    out = run_program(inst, tmp_path, KVS_PROGRAM)
    assert out == [
        "get 3 b'\\xff\\x00' not json",
        "kinds True False False",
        "dir ['empty', 'raw', 'sub', 'text'] (['raw', 'text'], ['empty', 'sub']) {'k': [1]}",
        "walk [('empty', [], []), ('sub', [], ['x']), ('', ['empty', 'sub'], ['raw', 'text'])]",
        "replaced 2 3 True",
        "links 2 False",
        "namespaces ['primary', 'other'] ['also', 'here'] 7 False True",
        "filled 1 False",
        "removed ENOTSUP ['primary']",
    ]


JOURNAL_CALLBACK_PROGRAM = r'''
import flux, flux.job
from flux.job import JobspecV1, JournalConsumer

h = flux.Flux()
seen = []
def on_event(event, tag, more=None):
    seen.append((event, tag, more))
    if event.is_empty():
        consumer.stop()
consumer = JournalConsumer(h, include_sentinel=True)
consumer.set_callback(lambda e: seen.append("replaced"))
consumer.start()
jobid = flux.job.submit(h, JobspecV1.from_command(["true"]))
flux.job.wait(h, jobid)
consumer.set_callback(on_event, "t", more=1)
print("reactor", h.reactor_run())
events = [e for e, _, _ in seen if not e.is_empty()]
print("events", [e.name for e in events][:2], events[-1].name, seen[0][1:],
      "replaced" not in seen)
print("ordered", all(a.timestamp < b.timestamp for a, b in zip(events, events[1:])))
print("str", "jobspec=" in str(events[0]), any("R=" in str(e) for e in events))
'''


def test_journal_callbacks_from_the_reactor(inst, tmp_path):
    """JournalConsumer.set_callback: events through the reactor, in strictly
    increasing timestamp order (each entry its own), a callback replaced before
    any event, and reactor_run returning once the journal is stopped."""
    out = run_program(inst, tmp_path, JOURNAL_CALLBACK_PROGRAM)
    assert out == ["reactor 0", "events ['submit', 'validate'] clean ('t', 1) True",
                   "ordered True", "str True True"]


WATCHER_PROGRAM = r'''
import io
import flux, flux.job
from flux.job import JobspecV1
from flux.job.watcher import JobStatus, JobWatcher

h = flux.Flux()
ok = flux.job.submit(h, JobspecV1.from_command(["sh", "-c", "echo out; echo err >&2"]))
bad = flux.job.submit(h, JobspecV1.from_command(["sh", "-c", "echo two; exit 3"]))
got = []
w = JobWatcher(h, output_callback=lambda j, s, d: got.append((int(j), s, d)))
w.start()
w.add_jobid(ok)
w.add_jobid(bad)
print("reactor", h.reactor_run())
print("output", sorted(got) == sorted([(ok, "stdout", "out\n"), (ok, "stderr", "err\n"),
                                       (bad, "stdout", "two\n")]), w.exitcode)
out = io.StringIO()
w2 = JobWatcher(h, stdout=out, labelio=True)
w2.start()
w2.add_jobid(ok)
h.reactor_run()
print("labelio", repr(out.getvalue()))
st = JobStatus(flux.job.job_list_id(h, bad).get_jobinfo())
print("status", st.status, st.exitcode, st.active)
try:
    JobWatcher(h, progress=True)
except OSError as exc:
    print("progress", str(exc).split(":")[0])
'''


def test_job_watcher_follows_output_from_the_reactor(inst, tmp_path):
    assert run_program(inst, tmp_path, WATCHER_PROGRAM) == [
        "reactor 0", "output True 3", "labelio '0: out\\n'", "status failed 3 False",
        "progress flux.job.watcher.JobWatcher(progress)"]


OUTPUT_PROGRAM = r'''
import errno
import flux, flux.job
from flux.job import JobspecV1, job_output, output_watch, output_watch_lines_async

h = flux.Flux()
spec = JobspecV1.from_command(["sh", "-c", "printf 'a\nb\n'; echo err >&2"], num_tasks=2)
j = flux.job.submit(h, spec)
out = job_output(h, j, labelio=True, tasks="1")
print("output", repr(out.stdout), repr(out.stderr), repr(out.log))
print("watch", sorted(set(output_watch(h, j))))
lines = []
def cb(f):
    lines.append(f.getline())
output_watch_lines_async(h, j).then(cb)
h.reactor_run()
print("lines", sorted(lines))
held = flux.job.submit(h, JobspecV1.from_command(["true"]), urgency=0)
flux.job.cancel(h, held)
try:
    list(output_watch(h, held))
except OSError as exc:
    print("never", errno.errorcode[exc.errno], exc.strerror == f"job {held} never started")
try:
    job_output(h, 12345)
except FileNotFoundError:
    print("unknown")
'''


def test_job_output_calls_read_the_output_eventlog(inst, tmp_path):
    assert run_program(inst, tmp_path, OUTPUT_PROGRAM) == [
        "output '1: a\\n1: b\\n' '1: err\\n' ''",
        "watch [('stderr', 'err\\n'), ('stdout', 'a\\nb\\n')]",
        "lines [('stderr', 'err'), ('stderr', 'err'), ('stdout', 'a'), ('stdout', 'a'), "
        "('stdout', 'b'), ('stdout', 'b')]",
        "never EIO True", "unknown"]


STATS_PROGRAM = r'''
import subprocess
import flux, flux.job
from flux.job import JobspecV1
from flux.job.stats import JobStats

h = flux.Flux()
for cmd in (["true"], ["false"]):
    flux.job.wait(h, flux.job.submit(h, JobspecV1.from_command(cmd)))
s = JobStats(h)
print("before", s.active, s.inactive)
s.update_sync()
print("sync", s.inactive, s.successful, s.failed, s.active, s.pending, s.running)
seen = []
s.update(callback=lambda st, tag=None: seen.append((st.inactive, tag)), tag="t")
h.reactor_run()
print("async", seen)
print("version", subprocess.run(["flux", "version"], capture_output=True,
                                text=True).stdout.split()[0])
'''


def test_job_stats_and_flux_version(inst, tmp_path):
    assert run_program(inst, tmp_path, STATS_PROGRAM) == [
        "before -1 -1", "sync 2 1 1 0 0 0", "async [(2, 't')]", "version commands:"]


JOBSPEC_YAML = """
version: 1
resources:
  - type: slot
    count: 2
    label: task
    with:
      - type: core
        count: 1
tasks:
  - command: ["sh", "-c", "echo $WHERE"]
    slot: task
    count:
      per_slot: 1
attributes:
  system:
    duration: 0
"""

RESULT_PROGRAM = r'''
import io, os, sys, flux, flux.job, flux.kvs
from flux.job import Jobspec, JobspecV1

h = flux.Flux()
spec = JobspecV1.from_yaml_stream(sys.argv[1])
spec.cwd, spec.environment = os.getcwd(), dict(os.environ)
print("yaml", [r["type"] for r in spec], dict(spec.resource_counts()))
for bad in ("version: 1\nresources: []\ntasks: []\n",
            sys.argv[1].replace("count: 2", "count: 0")):
    try:
        Jobspec.from_yaml_stream(bad)
    except (ValueError, TypeError) as exc:
        print("refused", type(exc).__name__)
spec.setattr_shell_option("env-expand", {"WHERE": "job {{id}} size {{size}}"})
spec.setattr_shell_option("output.stdout.label", True)
spec.output = "out.txt"
ok = flux.job.submit(h, spec, waitable=True)
status = flux.job.wait_async(h, ok).wait_for(60).get_status()
print("wait", status.jobid == ok, status.success)
lines = sorted(open("out.txt").read().splitlines())
print("output", lines == [f"{r}: job {ok.f58} size 2" for r in (0, 1)])
bad = flux.job.submit(h, JobspecV1.from_command(["sh", "-c", "exit 3"]))
seen = {}
flux.job.result_async(h, bad).then(lambda f: seen.update(info=f.get_info()))
h.reactor_run()
info = seen["info"]
print("result", info.id == bad, info.result, info.returncode,
      flux.job.result(h, bad).returncode)
job = flux.job.get_job(h, ok)
print("get_job", job["id"] == ok, job["result"], job["ntasks"], job["exception"]["occurred"],
      flux.job.get_job(h, 123456))
for d in (flux.job.job_kvs(h, ok), flux.job.job_kvs_guest(h, ok)):
    print("kvs", isinstance(d, flux.kvs.KVSDir), flux.kvs.isdir(h, d.path))
print("attrs", {"ncores", "queue", "all"} <= set(h.rpc("job-list.list-attrs").get()["attrs"]))
built = JobspecV1.from_command(["true"], env_expand={"T": "{{tmpdir}}"}, label_io=True,
                               unbuffered=True, queue="q", bank="b", environment={"N": 1})
print("options", built.getattr("system.shell.options.env-expand"),
      built.getattr("system.shell.options.output.stderr.label"),
      built.getattr("system.shell.options.output.stdout.buffer.type"),
      built.getattr("system.queue"), built.getattr("system.bank"))
try:
    flux.job.timeleft(h)
except OSError as exc:
    print("timeleft", exc.errno)
'''


def test_yaml_jobspecs_wait_and_result_futures_get_job_and_job_kvs(inst, tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(RESULT_PROGRAM)
    python = fluxlite_command()[0].rsplit("/", 1)[0] + "/python"
    env = {k: v for k, v in inst.env.items() if k not in ("FLUX_JOB_ID", "FLUXLITE_JOB_ID")}
    cp = subprocess.run(["sh", "-c", COMPAT + f'{python} {prog} "$0"', JOBSPEC_YAML],
                        env=env, capture_output=True, text=True, timeout=90, cwd=tmp_path)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.splitlines() == [
        "yaml ['slot', 'core'] {'slot': 2, 'core': 2}",
        "refused ValueError", "refused ValueError",
        "wait True True", "output True",
        "result True FAILED 3 3",
        "get_job True COMPLETED 2 False None",
        "kvs True True", "kvs True True",
        "attrs True",
        "options {'T': '{{tmpdir}}'} True none q b",
        "timeleft 22"]


INGEST_PROGRAM = r'''
import errno, os, flux, flux.job
from fluxlite.job import signed
from flux.job import JobspecV1

h = flux.Flux()
try:
    h.rpc("job-ingest.submit", {"J": "", "urgency": -1000, "flags": 0}).get()
except OSError as exc:
    print("urgency", errno.errorcode[exc.errno], exc.strerror)
try:
    h.rpc("job-ingest.submit", {"J": "x.y.none"}).get()
except OSError as exc:
    print("J", errno.errorcode[exc.errno])
J = signed.wrap(JobspecV1.from_command(["sh", "-c", "exit 6"]).jobspec, os.getuid())
jobid = h.rpc("job-ingest.submit", {"J": J, "urgency": 16, "flags": 0}).get()["id"]
print("ran", flux.job.result(h, jobid).returncode)
'''


def test_job_ingest_submit_takes_fluxs_unsigned_J(inst, tmp_path):
    assert run_program(inst, tmp_path, INGEST_PROGRAM) == [
        "urgency EINVAL urgency range is [0:31]", "J EINVAL", "ran 6"]


WATCH_FULL_PROGRAM = r'''
import flux, flux.kvs

h = flux.Flux()
with flux.kvs.get_dir(h) as d:
    d.mkdir("w")
    d["w.val"] = 1
seen = {"plain": [], "full": []}


def on_value(future, name):
    try:
        value = future.get()
    except OSError as exc:
        seen[name].append(exc.errno)
        return
    if value is None:
        seen[name].append("end")
        return
    seen[name].append(value)
    if name == "full" and value == 1:
        flux.kvs.put_unlink(h, "w")
        flux.kvs.commit(h)


plain = flux.kvs.kvs_watch_async(h, "w.val")
full = flux.kvs.kvs_watch_async(h, "w.val", full=True)
plain.then(on_value, "plain")
full.then(on_value, "full")
h.reactor_run()
print("plain", seen["plain"])
print("full", seen["full"])
'''


def test_a_full_kvs_watch_reports_a_removed_directory_above_it(inst, tmp_path):
    import errno
    assert run_program(inst, tmp_path, WATCH_FULL_PROGRAM) == [
        "plain [1, 'end']", f"full [1, {errno.ENOENT}]"]


CHECKPOINT_PROGRAM = r'''
import errno, flux, flux.kvs
h = flux.Flux()
try:
    flux.kvs.kvs_checkpoint_lookup(h)
except OSError as exc:
    print("none", errno.errorcode[exc.errno])
else:
    flux.kvs.put(h, "ck.a", 1)
    flux.kvs.commit(h)
    version = h.rpc("kvs.stats").get()["version"]
    for bypass in (False, True):
        (c,) = flux.kvs.kvs_checkpoint_lookup(h, cache_bypass=bypass)
        print("checkpoint", c["version"], c["sequence"] >= version, c["timestamp"] > 0,
              c["rootref"] != "")
'''


CHECKPOINT_ZERO_PROGRAM = r'''
import flux, flux.kvs
h = flux.Flux()
flux.kvs.put(h, "ck.a", 1)
flux.kvs.commit(h)
for bypass in (False, True):
    (c,) = flux.kvs.kvs_checkpoint_lookup(h, cache_bypass=bypass)
    print("checkpoint", c["version"], c["sequence"], c["timestamp"] > 0, c["rootref"])
'''


def test_kvs_checkpoint_lookup_with_and_without_a_state_directory(instance_factory,
                                                                  tmp_path):
    # a commit is answered once on disk: the checkpoint has it by then
    durable = instance_factory(1, setattrs=[f"statedir={tmp_path / 'state'}"])
    assert run_program(durable, tmp_path, CHECKPOINT_PROGRAM) == [
        "checkpoint 1 True True True", "checkpoint 1 True True True"]
    # without one, as Flux's run-directory store: the KVS as it began, sequence 0
    assert run_program(instance_factory(1), tmp_path, CHECKPOINT_ZERO_PROGRAM) == [
        "checkpoint 1 0 True rundir:kvs-version-0"] * 2


CANCEL_DURING_START_PROGRAM = r'''
import time, flux, flux.job
from flux.job import JobspecV1
h = flux.Flux()
results = []
for i in range(16):
    jobid = flux.job.submit(h, JobspecV1.from_command(["sleep", "1000"]), waitable=True)
    time.sleep(0.002 * (i % 8))    # the cancel lands at each moment of the job's start
    flux.job.cancel(h, jobid)
    results.append(flux.job.wait_async(h, jobid).wait_for(60).get_status()[1])
print("ended", len(results), any(results))
'''


def test_a_job_cancelled_during_its_start_ends_without_the_kill_timeout(instance_factory,
                                                                        tmp_path):
    """A cancel that reaches job-exec before a shell is up (no process yet, or one
    that has not put back its signal handlers) is not lost: with an hour's kill
    timeout, every job still ends (t0010's test_15_job_cancel)."""
    inst = instance_factory(1, setattrs=["exec.kill-timeout=1h"])
    assert run_program(inst, tmp_path, CANCEL_DURING_START_PROGRAM,
                       timeout=110) == ["ended 16 False"]


ENOSYS_PROGRAM = r'''
import errno, flux, flux.job.watcher, flux.security
from flux.core.inner import ffi
calls = {
    "loop": lambda: flux.Flux("loop://"),
    "flags": lambda: flux.Flux(flags=4),
    "security": lambda: flux.security.SecurityContext(),
    "ffi": lambda: ffi.new,
    "watcher": lambda: flux.job.watcher.JobWatcher(flux.Flux(), progress=True),
}
for what, call in calls.items():
    try:
        call()
    except OSError as exc:
        print(what, errno.errorcode[exc.errno], str(exc).split(":")[0])
'''


def test_what_fluxlite_cannot_do_is_enosys_naming_the_call(inst, tmp_path):
    """Each call guide section 10 lists as impossible here: OSError(ENOSYS) whose
    message starts with the call's name."""
    assert run_program(inst, tmp_path, ENOSYS_PROGRAM) == [
        "loop ENOSYS flux.Flux('loop", "flags ENOSYS flux.Flux(flags=...)",
        "security ENOSYS flux.security.SecurityContext", "ffi ENOSYS flux.core.inner.ffi.new",
        "watcher ENOSYS flux.job.watcher.JobWatcher(progress)"]
