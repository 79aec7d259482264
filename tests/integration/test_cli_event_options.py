"""flux event pub/sub through the real CLI: a published payload is printed as it was
published, as flux-event(1) prints it (a JSON payload's text as given, raw bytes with
each unprintable byte as '.')."""

import os


def test_sub_prints_payloads_as_published(inst1):
    events = [("t.json", '{"b": 1,  "a":2}', False),
              ("t.utf8", '{"name": "\u00e9t\u00e9"}', False),
              ("t.raw", os.fsdecode(b"\xff\x01"), True)]
    with inst1.cli_background("event", "sub", "-c", str(len(events)), "t.") as sub:
        # the subscriber may subscribe in the middle of a round: publish rounds (each
        # event waits until it came back) until it has printed one event of each
        for _ in range(40):
            for topic, payload, raw in events:
                inst1.cli("event", "pub", "-l", *(["-r"] if raw else []), topic, payload,
                          check=True, timeout=30)
            if sub.poll() is not None:
                break
        text, err = sub.communicate(timeout=30)
    assert sub.returncode == 0 and "Traceback" not in err
    assert sorted(text.splitlines()) == ['t.json\t{"b": 1,  "a":2}',
                                         't.raw\t..',
                                         't.utf8\t{"name": "\u00e9t\u00e9"}']

