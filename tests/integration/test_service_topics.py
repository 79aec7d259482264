"""One set of service topics: the services answer Flux's topics with Flux's payloads,
and fluxlite's own CLI uses the same ones (no second, fluxlite-only name for the
same thing)."""

import pytest

from fluxlite.errors import NoService, NotFound, PermissionDenied, ProtocolError, UsageError

pytestmark = pytest.mark.timeout(120)


def test_attr_topics_answer_in_flux_shapes(inst1):
    h = inst1.handle()
    assert h.call("attr.get", {"name": "size"}) == {"value": "1", "flags": 0}
    names = h.call("attr.list")["names"]
    assert {"rank", "size", "local-uri", "rundir"} <= set(names)
    assert h.call("attr.set", {"name": "site.label", "value": "blue"}) is None
    assert h.call("attr.get", {"name": "site.label"})["value"] == "blue"
    assert "site.label" in h.call("attr.list")["names"]
    h.call("attr.rm", {"name": "site.label"})
    with pytest.raises(NotFound):
        h.call("attr.get", {"name": "site.label"})
    with pytest.raises(PermissionDenied):
        h.call("attr.rm", {"name": "rank"})
    # the names fluxlite once had for the same thing are gone
    for topic in ("broker.getattr", "broker.setattr", "broker.lsattr"):
        with pytest.raises(NoService):
            h.call(topic, {"name": "size"})


def test_attr_cli_goes_through_flux_topics(inst1):
    # setattr of a name outside the broker's table makes a user attribute, as Flux's
    inst1.cli("setattr", "site.color", "green", check=True)
    assert inst1.cli("getattr", "site.color", check=True).stdout == "green\n"
    lines = inst1.cli("lsattr", "-v", check=True).stdout.splitlines()
    values = {name: value.strip() for name, _, value in
              (line.partition(" ") for line in lines)}
    assert values["site.color"] == "green"
    assert values["size"] == "1"
    h = inst1.handle()
    for name, shown in values.items():     # an unset one (attr.get: ENOENT) shows '-'
        try:
            assert shown == h.call("attr.get", {"name": name})["value"].strip()
        except NotFound:
            assert shown == "-"
    names = inst1.cli("lsattr", check=True).stdout.split()
    assert names == sorted(values)
    cp = inst1.cli("setattr", "size", "9")
    assert cp.returncode != 0 and "cannot be changed" in cp.stderr


def test_config_load_replaces_the_config_object(inst1):
    h = inst1.handle()
    assert h.call("config.get") == {}
    doc = {"site": {"rack": {"row": 4}, "name": "lab"},
           "tbon": {"torpid-timeout": "5s"}}
    assert h.call("config.load", doc) is None
    # the attribute changed (through attr.set), the rest is kept as given
    assert h.call("attr.get", {"name": "tbon.torpid-timeout"})["value"] == "5s"
    assert h.call("config.get") == doc
    assert inst1.cli("config", "get", "site.rack.row", check=True).stdout.strip() == "4"
    # as Flux's: a key read only at start is taken into the config, in effect at the
    # next start; the running value stays
    topo = h.call("attr.get", {"name": "tbon.topo"})["value"]
    h.call("config.load", {**doc, "tbon": {"topo": "kary:3", "torpid-timeout": "5s"}})
    assert h.call("attr.get", {"name": "tbon.topo"})["value"] == topo
    # one key that is not right refuses the whole object: nothing changes
    with pytest.raises(UsageError, match="invalid value for tbon.lost-timeout"):
        h.call("config.load", {"tbon": {"lost-timeout": "soon"}, "site": {}})
    with pytest.raises(UsageError, match="unknown key 'tbon.color'"):
        h.call("config.load", {"tbon": {"color": "red"}})
    assert h.call("config.get")["site"] == doc["site"]
    with pytest.raises(UsageError, match="payload must be a config object"):
        h.call("config.load", [1, 2])
    # a new object replaces the old one whole: what it leaves out is back to default
    h.call("config.load", {"site": {"name": "lab2"}})
    assert h.call("config.get") == {"site": {"name": "lab2"}}
    assert h.call("attr.get", {"name": "tbon.torpid-timeout"})["value"] == "3s"


def test_event_and_service_topics_are_fluxs(inst1):
    import base64
    sub, pub = inst1.handle(), inst1.handle()
    got = []
    sub.on_event = got.append
    assert sub.call("event.subscribe", {"topic": "lab."}) == {}
    # Flux's event.publish: the payload is base64 of its JSON text (or of raw bytes)
    for raw in (b'{"n": 1}', b"plain words", b"\xff\xfe"):
        r = pub.call("event.publish", {"topic": "lab.x", "flags": 0,
                                       "payload": base64.b64encode(raw).decode()})
        assert r["seq"] > 0
    pub.call("event.publish", {"topic": "lab.empty", "flags": 0})
    assert sub.run_until(lambda: len(got) == 4, timeout=30)
    assert [(e.topic, e.payload) for e in got] == [
        ("lab.x", {"n": 1}), ("lab.x", "plain words"), ("lab.x", b"\xff\xfe"),
        ("lab.empty", None)]
    with pytest.raises(ProtocolError):
        pub.call("event.publish", {"topic": "lab.x", "payload": "not base64!"})
    assert sub.call("event.unsubscribe", {"topic": "lab."}) == {}
    with pytest.raises(NotFound):
        sub.call("event.unsubscribe", {"topic": "lab."})
    # a client's service, registered by Flux's service.add {service}
    asked = []
    sub.on_request = lambda msg: (sub.respond(msg, {"echo": msg.payload}), asked.append(1))
    assert sub.call("service.add", {"service": "labsvc"}) == {}
    pending = pub.rpc("labsvc.hello", {"a": 1})
    assert sub.run_until(lambda: asked, timeout=30)
    pub.wait(pending, 30)
    assert pending.take() == {"echo": {"a": 1}}
    assert sub.call("service.remove", {"service": "labsvc"}) == {}
    with pytest.raises(NoService):
        pub.call("labsvc.hello", {"a": 1})
    for topic in ("broker.publish", "broker.subscribe", "broker.unsubscribe",
                  "broker.service-add", "broker.service-remove"):
        with pytest.raises(NoService):
            pub.call(topic, {"topic": "lab.", "name": "x"})
