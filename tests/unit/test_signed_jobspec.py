"""J, Flux's signed jobspec, in its unsigned ("none" mechanism) form."""

import base64
import json

import pytest

from fluxlite.errors import PermissionDenied, UsageError
from fluxlite.job import signed

pytestmark = pytest.mark.timeout(10)


def flux_J(jobspec, header=b"version\0i1\0userid\0i1000\0mech\0snone\0", sig="none"):
    """J as flux-core's sign_none_wrap lays it out, written out by hand."""
    return ".".join((base64.b64encode(header).decode(),
                     base64.b64encode(json.dumps(jobspec).encode()).decode(), sig))


def test_unwrap_reads_fluxs_layout_and_wrap_writes_it():
    spec = {"version": 1, "tasks": []}
    assert signed.unwrap(flux_J(spec), 1000) == spec
    assert signed.wrap(spec, 1000) == flux_J(spec)


@pytest.mark.parametrize("J", [
    "", "a.b", "a.b.c.d",
    flux_J({}, sig="curve"),
    flux_J({}, header=b"version\0i2\0userid\0i1000\0mech\0snone\0"),
    flux_J({}, header=b"version\0i1\0userid\0i-1\0mech\0snone\0"),
    flux_J({}, header=b"version\0i1\0userid\0i1000\0mech\0snone\0extra\0sx\0"),
    flux_J({}, header=b"version\0i1\0userid\0i1000\0mech\0"),
    flux_J([1]),
    "bm90IGJhc2U2NA==.!!!.none",
])
def test_a_malformed_J_is_a_usage_error(J):
    with pytest.raises(UsageError):
        signed.unwrap(J, 1000)


def test_a_J_of_another_user_is_refused():
    with pytest.raises(PermissionDenied, match="userid 1000, not by the submitting user"):
        signed.unwrap(flux_J({}), 1001)
