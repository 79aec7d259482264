"""Format options (-o) of `jobs` and `resource` through the real CLI: a name that
is neither a named format nor a field gets a suggestion that exists."""

import pytest


@pytest.mark.parametrize("args,said", [
    (("resource", "list", "-o", "rlist"), "named formats: default; or a format string"),
    (("jobs", "-o", "rlist"), "named formats: "),   # deps is one of them, as in Flux
    (("jobs", "-o", "nnodes"), "Did you mean '{nnodes}'?"),
    (("resource", "status", "-o", "lng"), "Did you mean 'long'?"),
    (("resource", "status", "-o", "reasn"), "Did you mean '{reason}'?"),
])
def test_format_suggestions_point_to_something_that_exists(inst1, args, said):
    cp = inst1.cli(*args)
    assert cp.returncode != 0 and cp.stdout == ""
    assert len(cp.stderr.splitlines()) == 1 and said in cp.stderr, cp.stderr
    assert "'{rlist}'" not in cp.stderr
