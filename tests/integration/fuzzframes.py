"""Seeded garbage for fuzzing brokers and job shells: random bytes, and structured
messages whose every field may be wrong.

Three layers, mixed at random so that each part of the receiving code sees its
share: raw frames (any bytes, any number of frames), headers of the right shape
with fields of any type or range, and well-formed requests to real methods whose
payloads are valid samples with one field replaced by a hostile value (NaN, a
negative id, 2**64, a bool where an int belongs, a deep or huge container).
Everything comes from one random.Random(seed), so a failing run replays exactly.
"""

from __future__ import annotations

import math
import random

from fluxlite.protocol import message as m

# methods a client may call, with a valid sample payload each; methods that a
# well-formed request could use to take the instance down on purpose
# (broker.shutdown, attr.set, resource.drain, rexec.exec, resource.reload,
# resource.acquire-mute, module.remove of what jobs need) are left out:
# the owner may do that, and it is not what a fuzzer is after
METHODS = {
    "broker.ping": {"pad": "x"},
    "attr.get": {"name": "size"},
    "attr.list": {},
    "broker.dmesg": {},
    "service.add": {"service": "fuzzsvc"},
    "service.remove": {"service": "fuzzsvc"},
    "event.subscribe": {"topic": "fuzz."},
    "event.unsubscribe": {"topic": "fuzz."},
    "event.publish": m.event_publish_payload("fuzz.event", {"a": 1}),
    "broker.state": {},
    "kvs.lookup": {"key": "fuzz.a"},
    "kvs.commit": {"ops": [{"key": "fuzz.a", "value": 1}]},
    "kvs-watch.lookup": {"key": "fuzz.a", "flags": 4 | 8},     # FLUX_KVS_WATCH|WAITCREATE
    "kvs-watch.cancel": {"matchtag": 1},
    "kvs.stats": {},
    "job-manager.submit": None,   # filled in with a real jobspec by the caller
    "job-manager.wait": {"id": 1},
    "job-manager.info": {"id": 1},
    "job-manager.list": {"states": "all"},
    "job-manager.cancel": {"id": 1, "note": "fuzz"},
    "job-manager.raise": {"id": 1, "type": "fuzz", "severity": 1},
    "job-manager.kill": {"id": 1, "signum": 15},
    "job-manager.memo": {"id": 1, "memo": {"a": 1}},
    "sched.feasibility": None,
    "sched.cancel": {"id": 1},
    "sched.resource-status": {},
    "resource.status": {},
    "resource.undrain": {"targets": "0"},
    "job-exec.kill": {"id": 1, "signum": 15},
    "job-exec.critical-ranks": {"id": 1, "ranks": "0"},
    "job-exec.critical-ranks-get": {"id": 1},
    "job-exec.proctable": {"id": 1},
    "job-manager.queue-list": {},
    "job-manager.jobtap": {},
    "module.list": {},
    "log.append": {"appname": "fuzz", "severity": "info", "message": "fuzz"},
    "config.get": {},
    "rexec.write": {"label": "fuzz", "data": b"x", "eof": True},
    "job-exec.shell-init": {"id": 1, "shell_rank": 0},
    "job-exec.shell-start": {"id": 1, "shell_rank": 0},
    "rexec.kill": {"label": "nosuch", "signum": 15},
    "rexec.list": {},
    "overlay.health": {},
    "overlay.status": {},
    "overlay.watch": {},
    # modules, their per-module methods, jobtap, config and the KVS root: what a
    # vanished fuzzer leaves open (a trace, a version wait) must go with it
    "module.remove": {"name": "log"},
    "module.load": {"path": "log", "args": []},
    "module.trace": {"names": ["log", "kvs"], "typemask": 15, "topic_glob": "*",
                     "full": True},
    "kvs.rusage": {"who": "self"},
    "kvs.stats-get": {},
    "kvs.debug": {"op": "setbit", "flags": 1},
    "job-manager.rusage": {"who": "children"},
    "sched.stats-get": {},
    "log.debug": {"op": "clr", "flags": 0},
    "job-manager.jobtap-query": {"name": ".history"},
    "kvs.getroot": {"namespace": "primary"},
    "kvs.wait-version": {"rootseq": 1, "namespace": "job-1"},
    "config.load": {"site": {"fuzz": [1, {"a": "b"}]}},
    "config.reload": {},
}

# a job shell's methods (prefixed with its service name), with valid samples
SHELL_METHODS = {
    "tasks-done": {"shell_rank": 0},
    "exception": {"type": "lost-shell", "severity": 2, "shell_rank": 0, "message": "x"},
    "critical-ranks": {"ranks": "0", "seq": 0},
    "doom": {"shell_rank": 0, "host": "h", "rank": 0, "localid": 0, "pid": 1,
             "wait_status": 0, "signaled": False, "exitcode": 0, "disposition": "x"},
    "pmi-barrier": {"shell_rank": 0, "seq": 1, "keys": {}},
    "pty-attach": {},
    "pty-write": {"data": b"x"},
    "pty-resize": {"rows": 24, "cols": 80},
    "nosuch": {},
}


class Fuzzer:
    def __init__(self, seed: int, *, size: int, jobspec: dict):
        self.rng = random.Random(seed)
        self.size = size
        self.methods = dict(METHODS)
        self.methods["job-manager.submit"] = {"jobspec": jobspec}
        self.methods["sched.feasibility"] = {"jobspec": jobspec}

    # ------------------------------------------------------------ values
    def value(self, depth: int = 0):
        """A hostile value of any msgpack type."""
        r = self.rng
        choices = [
            lambda: r.choice([0, -1, 1, 2 ** 31, 2 ** 32, 2 ** 63 - 1, -(2 ** 63),
                              2 ** 64 - 1, r.randint(-10 ** 6, 10 ** 6)]),
            lambda: r.choice([True, False, None]),
            lambda: r.choice([math.nan, math.inf, -math.inf, -0.0, 1e308, r.random()]),
            lambda: r.choice(["", "x" * r.randint(1, 300), "\u0192\u2603\U0001f600", "a.b.",
                              ".", "..", "all", "0-3", "none", "1e9", "-1",
                              "x" * r.randint(60000, 70000)]),
            lambda: r.randbytes(r.randint(0, 64)),
            lambda: [self.value(depth + 1) for _ in range(r.randint(0, 4))] if depth < 4
            else [],
            lambda: {self._key(): self.value(depth + 1) for _ in range(r.randint(0, 4))}
            if depth < 4 else {},
            lambda: [[]] * r.randint(1000, 20000),   # many small containers
            lambda: {str(i): i for i in range(r.randint(100, 3000))},
        ]
        return r.choice(choices)()

    def _key(self):
        r = self.rng
        return r.choice(["id", "key", "name", "ops", "jobspec", "type", "value", "ranks",
                         "targets", "topic", "payload", "x" * r.randint(0, 20)])

    def mutate(self, sample):
        """`sample` with one field (at any depth) replaced, removed or added."""
        r = self.rng
        if not isinstance(sample, dict) or not sample or r.random() < 0.1:
            return self.value()
        out = dict(sample)
        key = r.choice(list(out))
        action = r.random()
        if action < 0.7:
            inner = out[key]
            if isinstance(inner, (dict, list)) and inner and r.random() < 0.5:
                if isinstance(inner, list):
                    inner = list(inner)
                    i = r.randrange(len(inner))
                    inner[i] = self.mutate(inner[i])
                    out[key] = inner
                else:
                    out[key] = self.mutate(inner)
            else:
                out[key] = self.value()
        elif action < 0.85:
            del out[key]
        else:
            out[self._key()] = self.value()
        return out

    def _pack(self, obj) -> bytes:
        try:
            return m._packb(obj)
        except (OverflowError, ValueError, TypeError):
            return self.rng.randbytes(16)

    # ------------------------------------------------------------ frames
    def raw_frames(self) -> list[bytes]:
        r = self.rng
        return [r.randbytes(r.choice([0, 1, 8, 40, 300, 5000])) for _ in range(r.randint(1, 4))]

    def bad_header(self) -> list[bytes]:
        r = self.rng
        fields = [m.REQUEST, 0, "broker.ping", m.NODEID_ANY, 1, 0, 0, "", 0, m.ROLE_OWNER, []]
        for _ in range(r.randint(1, 3)):
            fields[r.randrange(len(fields))] = self.value(3)
        if r.random() < 0.2:
            fields = fields[:r.randint(0, 12)]
        return [self._pack(fields), self._pack(self.value())]

    def request(self, topic: str, sample, *, nodeid: int | None = None) -> list[bytes]:
        r = self.rng
        payload = sample if r.random() < 0.15 else self.mutate(sample)
        flags = r.choice([0, 0, 0, m.STREAMING, m.NORESPONSE, m.UPSTREAM, r.randint(0, 255)])
        if nodeid is None:
            nodeid = r.choice([m.NODEID_ANY, m.NODEID_ANY, 0, r.randrange(self.size),
                               self.size + 3, 2 ** 32 - 2])
        mtype = m.REQUEST if r.random() < 0.9 else r.choice([m.RESPONSE, m.EVENT, m.CONTROL])
        route = [] if r.random() < 0.8 else [self.value(4)]
        head = [mtype, flags, topic, nodeid, r.randint(0, 2 ** 32 - 1), 0, 0, "",
                r.randint(0, 2 ** 31), r.randint(0, 3), route]
        return [self._pack(head), self._pack(payload)]

    def client_frames(self) -> list[bytes]:
        """One message for the local socket."""
        roll = self.rng.random()
        if roll < 0.15:
            return self.raw_frames()
        if roll < 0.3:
            return self.bad_header()
        topic = self.rng.choice(list(self.methods))
        return self.request(topic, self.methods[topic])

    def peer_frames(self, authenticated: bool = False) -> list[bytes]:
        """One message for a tbon socket (from a peer, hello'd or not; a peer that said
        hello sends no goodbye or second hello, which would end its session)."""
        r = self.rng
        roll = r.random()
        if roll < 0.3:
            return self.raw_frames()
        if roll < 0.5:
            return self.bad_header()
        if roll < 0.6:
            body = self.mutate({"online": "0", "lost": "", "offline": ""})
            topics = ["status", "keepalive", "bogus"] + \
                ([] if authenticated else ["goodbye", "hello"])
            return [self._pack([m.CONTROL, 0, r.choice(topics),
                                0, 0, 0, 0, "", 0, 1, []]), self._pack(body)]
        topic = r.choice(list(self.methods))
        return self.request(topic, self.methods[topic])

    def shell_frames(self, service: str, leader_rank: int) -> list[bytes]:
        name = self.rng.choice(list(SHELL_METHODS))
        return self.request(f"{service}.{name}", SHELL_METHODS[name], nodeid=leader_rank)
