"""flux event pub/sub through the real CLI: a published payload is printed as it was
published, as flux-event(1) prints it (a JSON payload's text as given, raw bytes with
each unprintable byte as '.', words that are not JSON as the string they make),
whichever rank publishes and whichever subscribes."""

import os
import subprocess

from fluxlite.testing import fluxlite_command

# (topic, payload words, -r): words that are not JSON are a string payload, as Flux's
EVENTS = [("t.json", ['{"b": 1,  "a":2}'], False),
          ("t.utf8", ['{"name": "\u00e9t\u00e9"}'], False),
          ("t.raw", [os.fsdecode(b"\xff\x01")], True),
          ("t.text", ["hello", "{world"], False)]
PRINTED = ['t.json\t{"b": 1,  "a":2}', 't.raw\t..', 't.text\thello {world',
           't.utf8\t{"name": "\u00e9t\u00e9"}']


def sub_while_publishing(inst, sub_args: list[str], events, env=None) -> list[str]:
    """The lines `event sub SUB_ARGS` prints (it must exit 0) while rounds of `events`
    ((topic, payload words, -r)) are published, each waiting until it came back: the
    subscriber may subscribe in the middle of a round, so rounds go on until it exits."""
    env = env or {}
    with subprocess.Popen(fluxlite_command() + ["event", "sub", *sub_args],
                          env={**inst.env, **env}, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE) as sub:
        try:
            for _ in range(40):
                for topic, payload, raw in events:
                    inst.cli("event", "pub", "-l", *(["-r"] if raw else []), topic, *payload,
                             check=True, timeout=30, env=env)
                if sub.poll() is not None:
                    break
            text, err = sub.communicate(timeout=30)
        finally:
            if sub.poll() is None:
                sub.kill()
                sub.wait()
    assert sub.returncode == 0 and "Traceback" not in err, err
    return text.splitlines()


def subscribed_lines(inst, env) -> list[str]:
    """What `event sub -c N t.` prints of one round of EVENTS, publisher and subscriber
    both connected where `env` says."""
    return sorted(sub_while_publishing(inst, ["-c", str(len(EVENTS)), "t."], EVENTS, env))


def test_sub_prints_payloads_as_published(inst1):
    assert subscribed_lines(inst1, {}) == PRINTED


def test_payloads_published_and_seen_on_rank_1_too(instance_factory):
    # rank 1 forwards the publish to rank 0, which sends the event down to rank 1
    inst = instance_factory(2)
    uri = inst.cli("getattr", "-r", "1", "local-uri", check=True).stdout.strip()
    assert subscribed_lines(inst, {"FLUXLITE_URI": uri}) == PRINTED


def test_sub_without_a_topic_sees_every_event(inst1):
    """As flux-event(1): no topic subscribes to all events (the empty prefix)."""
    lines = sub_while_publishing(inst1, ["-c", "20"], [("zz.any", ["hello"], False)])
    assert "zz.any\thello" in lines, lines
