"""How `config set` reads VALUE for each --type, as flux config set does: a
boolean is false for 0, f..., F... or empty (anything else is true), an integer
takes C's prefixes, a quoted string is JSON."""

import pytest

from fluxlite.cli.config import _parse_value, _type_of
from fluxlite.errors import UsageError

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("text,typ,value", [
    ("0", "boolean", False), ("false", "boolean", False), ("F", "boolean", False),
    ("", "boolean", False), ("1", "boolean", True), ("no", "boolean", True),
    ("0x10", "integer", 16), ("-7", "integer", -7), ("1.5", "real", 1.5),
    ('{"a": 1}', "object", {"a": 1}), ("[1]", "array", [1]),
    ("5m", "fsd", "5m"), ('"quoted"', "string", "quoted"), ("plain", "string", "plain"),
])
def test_values_by_type(text, typ, value):
    assert _parse_value(text, typ) == value


@pytest.mark.parametrize("text,typ", [
    ("ten", "integer"), ("x", "real"), ("[1]", "object"), ("{}", "array"),
    ("soon", "fsd"), ('"unclosed', "string"),
])
def test_bad_values(text, typ):
    with pytest.raises(UsageError):
        _parse_value(text, typ)


def test_type_of_the_value_now():
    assert [_type_of(v) for v in (True, 3, 2.5, {}, [], "s")] == [
        "boolean", "integer", "real", "object", "array", "string"]
