"""The job shell's pmi plugin (fluxlite/shell/plugins/pmi.py) over real
socketpairs: each task end speaks the PMI-1 wire protocol as MPICH's simple
client does, and the plugin answers from the shell's event loop.  Every
command, garbage, a missing key, a double init, the barrier exchange and
abort.  The shell around the plugin is a small stand-in of one shell's
ShellContext (the leader's) whose `pmi-barrier` call goes straight to the
plugin's handler; it offers nothing ShellContext does not (checked below)."""

import asyncio
import os
import socket

import pytest

from fluxlite.job import taskmap
from fluxlite.job.shell_info import CriticalRanks, ShellInfo
from fluxlite.pmi.pmi1 import decode
from fluxlite.protocol.dispatch import NO_REPLY
from fluxlite.shell.context import ShellContext
from fluxlite.shell.plugins.pmi import PMI, PMIBarrier

pytestmark = pytest.mark.timeout(20)


class Task:
    def __init__(self, rank):
        self.rank = rank
        self.pass_fds = ()
        self.env = {}
        self.done = asyncio.get_running_loop().create_future()
        self.status = None
        self.signaled = None

    def disposition(self):
        return f"exit {self.status >> 8}" if self.status is not None else "running"


class Shell:
    """What the pmi plugin uses of its ShellContext, for one shell of `ntasks` tasks.
    As the leader it enters the barrier in-process; else through the leader's
    service (`call_leader`), which goes to the plugin's handler here (as the broker
    would route it to the leader shell) and its answer comes back."""
    def __init__(self, ntasks, leader=False):
        self.is_leader = leader
        self.jobid = 123456789
        self.ntasks = ntasks
        self.task_ranks = range(ntasks)
        self.nshells = 1
        self.rank = 0
        self.service = "123456789-shell-123456789"
        self.hostname = "node0"
        self.arg0 = "prog"
        self.options = {"pmi": "simple"}
        self.info = ShellInfo(jobid=self.jobid, userid=1, shell_rank=0, ranks=[0],
                              counts=[ntasks], taskmap=taskmap.block([ntasks]),
                              service=self.service, jobspec={}, R={}, cores=[0],
                              hostname=self.hostname, critical=CriticalRanks(ranks="0"))
        self.logged = []
        self.raised = []
        self.raised_one = asyncio.Event()
        self.tasks = []
        self.calls = []
        self.pmi = PMI(self)

    async def call_leader(self, method, payload):
        self.calls.append((method, payload))
        msg = asyncio.get_running_loop().create_future()
        assert self.pmi._m_barrier(msg, PMIBarrier(**payload)) is NO_REPLY
        return await msg

    def respond(self, msg, payload=None):
        msg.set_result(payload)

    def respond_exception(self, msg, exc):
        msg.set_exception(exc)

    def log(self, message, level="INFO"):
        self.logged.append((level, message))

    def spawn(self, coro):
        return asyncio.ensure_future(coro)

    async def raise_exception(self, etype, severity, note, context, wait_status=None):
        self.raised.append((etype, severity, note, wait_status))
        self.raised_one.set()


class Conn:
    """The task's end of its PMI socketpair."""
    def __init__(self, task):
        self.sock = socket.socket(fileno=os.dup(int(task.env["PMI_FD"])))
        self.sock.setblocking(False)
        self.buf = b""

    async def send(self, line: bytes):
        await asyncio.get_running_loop().sock_sendall(self.sock, line)

    async def recv(self) -> dict:
        loop = asyncio.get_running_loop()
        while b"\n" not in self.buf:
            chunk = await asyncio.wait_for(loop.sock_recv(self.sock, 4096), 5)
            if not chunk:
                raise EOFError("PMI connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        cmd, args = decode(line)
        return dict(args, cmd=cmd)

    async def ask(self, line: bytes) -> dict:
        await self.send(line)
        return await self.recv()

    def close(self):
        self.sock.close()


async def start(ntasks=2, leader=False):
    shell = Shell(ntasks, leader)
    conns = []
    for r in range(ntasks):
        t = Task(r)
        shell.tasks.append(t)
        shell.pmi.task_init(t)
        assert t.env == {"PMI_FD": str(t.pass_fds[-1]), "PMI_RANK": str(r),
                         "PMI_SIZE": str(ntasks), "PMI_SPAWNED": "0"}
        conns.append(Conn(t))
    shell.pmi.shell_start()     # the shell's copies of the task ends are closed
    return shell, conns


INIT = b"cmd=init pmi_version=1 pmi_subversion=1\n"


@pytest.mark.parametrize("leader", [False, True], ids=["follower", "leader"])
async def test_every_command_over_a_socketpair(leader):
    shell, (c0, c1) = await start(2, leader)
    try:
        for c in (c0, c1):
            assert await c.ask(INIT) == {"cmd": "response_to_init", "rc": "0",
                                         "pmi_version": "1", "pmi_subversion": "1"}
        assert await c0.ask(b"cmd=get_maxes\n") == {
            "cmd": "maxes", "rc": "0", "kvsname_max": "64", "keylen_max": "64",
            "vallen_max": "1024"}
        assert await c0.ask(b"cmd=get_appnum\n") == {"cmd": "appnum", "rc": "0", "appnum": "0"}
        kvs = (await c0.ask(b"cmd=get_my_kvsname\n"))["kvsname"]
        assert kvs
        assert await c1.ask(b"cmd=get_universe_size\n") == {
            "cmd": "universe_size", "rc": "0", "size": "2"}
        # the node map is there before any barrier, as MPICH expects
        got = await c0.ask(b"cmd=get kvsname=%s key=PMI_process_mapping\n" % kvs.encode())
        assert got == {"cmd": "get_result", "rc": "0", "value": "(vector,(0,1,2))"}
        for r, c in enumerate((c0, c1)):
            put = b"cmd=put kvsname=%s key=card%d value=tcp://h:%d\n" % (kvs.encode(), r, r)
            assert await c.ask(put) == {"cmd": "put_result", "rc": "0"}
        await c0.send(b"cmd=barrier_in\n")
        await c1.send(b"cmd=barrier_in\n")
        assert await c0.recv() == {"cmd": "barrier_out", "rc": "0"}
        assert await c1.recv() == {"cmd": "barrier_out", "rc": "0"}
        # one message for the shell, carrying both tasks' keys; none on the leader
        assert [(m, p["keys"]) for m, p in shell.calls] == ([] if leader else [
            ("pmi-barrier", {"card0": "tcp://h:0", "card1": "tcp://h:1"})])
        for c in (c0, c1):
            got = await c.ask(b"cmd=get kvsname=%s key=card1\n" % kvs.encode())
            assert got == {"cmd": "get_result", "rc": "0", "value": "tcp://h:1"}
        missing = await c0.ask(b"cmd=get kvsname=%s key=nobody\n" % kvs.encode())
        assert missing["cmd"] == "get_result" and missing["rc"] == "-1"
        assert "not_found" in missing["msg"]
        for line, answer in ((b"cmd=publish_name service=a port=b\n", "publish_name_result"),
                             (b"cmd=lookup_name service=a\n", "lookup_name_result"),
                             (b"mcmd=spawn nprocs=1 execname=x\n", "spawn_result")):
            got = await c1.ask(line)
            assert got["cmd"] == answer and got["rc"] == "-1" and "not_supported" in got["msg"]
        for c in (c0, c1):
            assert await c.ask(b"cmd=finalize\n") == {"cmd": "finalize_ack", "rc": "0"}
            c.close()
        # a finalized task closing its end is quiet
        for _ in range(50):
            if not shell.pmi.socks:
                break
            await asyncio.sleep(0)
        assert shell.pmi.socks == {} and shell.logged == [] and shell.raised == []
    finally:
        shell.pmi.shell_exit()


async def test_double_init_garbage_and_unknown_commands_keep_serving():
    shell, (c0, c1) = await start(2)
    try:
        assert (await c0.ask(INIT))["rc"] == "0"
        assert (await c0.ask(INIT))["rc"] == "0"        # a second init: same answer
        early = await c1.ask(b"cmd=get_appnum\n")
        assert early["cmd"] == "error" and early["rc"] == "-1" and "before_init" in early["msg"]
        refused = await c1.ask(b"cmd=init pmi_version=2 pmi_subversion=0\n")
        assert refused["cmd"] == "response_to_init" and refused["rc"] == "-1"
        for line in (b"garbage\n", b"cmd=frobnicate\n", b"\xff\xfe\n", b"key=value\n"):
            got = await c0.ask(line)
            assert got["cmd"] == "error" and got["rc"] == "-1" and got["msg"], line
        # one log line for the task speaking garbage, not one per line
        assert [m for _, m in shell.logged] == [shell.logged[0][1]]
        assert "task rank 0" in shell.logged[0][1]
        # both tasks still served
        assert (await c0.ask(b"cmd=get_appnum\n"))["rc"] == "0"
        assert (await c1.ask(INIT))["rc"] == "0"
    finally:
        for c in (c0, c1):
            c.close()
        shell.pmi.shell_exit()


async def test_an_endless_line_closes_that_task_only():
    shell, (c0, c1) = await start(2)
    try:
        await c0.send(b"x" * 5000)
        with pytest.raises(EOFError):
            await c0.recv()
        assert any("longer than" in m for _, m in shell.logged), shell.logged
        assert (await c1.ask(INIT))["rc"] == "0"
    finally:
        for c in (c0, c1):
            c.close()
        shell.pmi.shell_exit()


async def test_abort_raises_an_exec_exception_with_the_code():
    shell, (c0, c1) = await start(2)
    try:
        await c1.ask(INIT)
        await c1.send(b"cmd=abort exitcode=7 error_msg=bad_input\n")
        await asyncio.wait_for(shell.raised_one.wait(), 5)
        [(etype, severity, note, status)] = shell.raised
        assert (etype, severity, status) == ("exec", 0, 7 << 8)
        assert "task rank 1" in note and "PMI abort" in note and "bad_input" in note
    finally:
        for c in (c0, c1):
            c.close()
        shell.pmi.shell_exit()


async def test_a_task_that_ends_before_any_spoke_pmi_still_fails_the_barrier():
    """The server is made when a task first speaks; a task that ended before that
    (exit 5 before MPI_Init) is still known to be gone when the other enters the
    barrier."""
    shell, (c0, c1) = await start(2)
    try:
        c1.close()
        t1 = shell.tasks[1]
        t1.status = 5 << 8
        shell.pmi.task_exit(t1)
        assert shell.pmi._server is None
        await c0.ask(INIT)
        await c0.send(b"cmd=barrier_in\n")
        out = await c0.recv()
        assert out["cmd"] == "barrier_out" and out["rc"] == "-1" and "rank_1" in out["msg"]
    finally:
        c0.close()
        shell.pmi.shell_exit()
        for t in shell.tasks:
            t.done.cancel()
        await asyncio.sleep(0)


@pytest.mark.parametrize("leader", [False, True], ids=["follower", "leader"])
async def test_a_task_leaving_before_the_barrier_releases_the_other_with_an_error(leader):
    shell, (c0, c1) = await start(2, leader)
    try:
        await c0.ask(INIT)
        await c1.ask(INIT)
        await c0.send(b"cmd=barrier_in\n")
        c1.close()
        out = await c0.recv()
        assert out["cmd"] == "barrier_out" and out["rc"] == "-1" and "rank_1" in out["msg"]
    finally:
        c0.close()
        shell.pmi.shell_exit()
        for t in shell.tasks:       # nothing awaits their exit here
            t.done.cancel()
        await asyncio.sleep(0)


def test_the_stand_in_offers_only_what_a_shell_context_does():
    """The plugin is tested through the API a job shell gives it, and no more."""
    shell = Shell(2)
    offered = {n for n in [*vars(shell), *vars(Shell)] if not n.startswith("_")}
    kept_by_the_test = {"pmi", "logged", "raised", "raised_one", "calls"}
    context = {n for n in dir(ShellContext) if not n.startswith("_")}
    assert offered - kept_by_the_test <= context, offered - kept_by_the_test - context
