"""The dump archive's member format (util/kvs_archive.py): every value reads back as it was."""

import pytest

from fluxlite.util import kvs_archive as ka

EVENTLOG = [{"timestamp": 1.5, "name": "submit", "context": {"userid": 1}}]


@pytest.mark.parametrize("value", [42, "text", "ends with a newline\n", [1, 2], {"a": [1]},
                                   None, True, [], [{"name": "x"}]])
def test_a_value_reads_back_as_a_value(value):
    assert ka.decode(ka.encode(value)) == {"value": value}


@pytest.mark.parametrize("entries", [EVENTLOG, EVENTLOG * 3])
def test_an_eventlog_is_json_lines_and_reads_back_as_appends(entries):
    data = ka.encode(entries)
    assert data.endswith(b"\n") and data.count(b"\n") == len(entries)
    assert ka.decode(data) == {"append": entries}


def test_keys_are_paths():
    key = "job.0000.0004.b200.0000.guest.output"
    assert ka.member_name(key) == "job/0000/0004/b200/0000/guest/output"
    assert ka.key_of(ka.member_name(key)) == key
