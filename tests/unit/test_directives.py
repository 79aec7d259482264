"""Batch script directives (RFC 36, as Flux's batch reads them): '# fluxlite:' always,
Flux's '# flux:' only with Flux compatibility on, and one warning per '# flux:'
line naming the fluxlite equivalent when it is off."""

import pytest

from fluxlite.cli.batch import read_directives
from fluxlite.errors import UsageError

pytestmark = pytest.mark.timeout(30)

FLUX_SCRIPT = """#!/bin/sh
# flux: -N2
# flux: --job-name=two  # a comment after the options
#
# flux: -o exit-timeout=5s -S user.x='a b'

flux run hostname
"""


def read(script, compat):
    warnings = []
    args = read_directives(script, "s.sh", compat=compat, warn=warnings.append)
    return args, warnings


def test_flux_directives_are_read_with_compat():
    args, warnings = read(FLUX_SCRIPT, True)
    assert args == ["-N2", "--job-name=two", "-o", "exit-timeout=5s", "-S", "user.x=a b"]
    assert warnings == []


def test_flux_directives_without_compat_each_get_one_warning():
    args, warnings = read(FLUX_SCRIPT, False)
    assert args == []
    assert len(warnings) == 3
    assert warnings[0].startswith("s.sh line 2: 'flux:' directive ignored")
    assert "write it '# fluxlite: -N2'" in warnings[0]
    assert 'eval "$(fluxlite compat env)"' in warnings[0]
    assert "fluxlite start --flux-compat" in warnings[0]
    assert [w.split(":")[0] for w in warnings] == ["s.sh line 2", "s.sh line 3", "s.sh line 5"]


def test_flux_directive_after_the_first_command_still_warns_without_compat():
    _, warnings = read("#!/bin/sh\ntrue\n# flux: -N2\n", False)
    assert len(warnings) == 1 and "line 3" in warnings[0]


def test_fluxlite_directives_are_read_either_way():
    script = "#!/bin/sh\n# fluxlite: -N2 -t 5\ntrue\n"
    assert read(script, False) == (["-N2", "-t", "5"], [])
    assert read(script, True) == (["-N2", "-t", "5"], [])


def test_directives_start_at_the_first_one_as_in_flux():
    # RFC 36: commands before the first directive do not end the directives
    args, _ = read("#!/bin/bash\nset -e\n# flux: -N2\n\n# flux: -n2\necho hi\n", True)
    assert args == ["-N2", "-n2"]


def test_other_comment_prefixes_as_in_flux():
    args, _ = read("#!/usr/bin/env lua\n-- flux: -N2\n-- a comment\n-- flux: -n4\n", True)
    assert args == ["-N2", "-n4"]


@pytest.mark.parametrize("script, words", [
    ("#!/bin/sh\n# flux: -N1\necho hi\n# flux: -N2\n",
     "s.sh line 4: orphan 'flux:' directive"),
    ("#!/bin/sh\n# flux: -N1\n#flux: -N2\n", "s.sh line 3: sentinel changed"),
    ("#!/bin/sh\n# flux: -N1\n# fluxlite: -N2\n", "s.sh line 3: sentinel changed"),
    ("#!/bin/sh\n# flux: N2\n", "s.sh line 2: unknown directive 'N2'"),
    ("#!/bin/sh\n# flux: -N2 'open\n", "argument parsing failed at s.sh line 2"),
    ("#!/bin/sh\n# flux: --bogus\n", "No such option '--bogus'"),
])
def test_bad_flux_directives_are_refused_with_compat(script, words):
    with pytest.raises(UsageError) as exc:
        read(script, True)
    assert words in exc.value.message


def test_compat_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("FLUXLITE_FLUX_COMPAT", "1")
    assert read_directives("#!/bin/sh\n# flux: -N2\n", warn=None) == ["-N2"]
    monkeypatch.delenv("FLUXLITE_FLUX_COMPAT")
    warnings = []
    assert read_directives("#!/bin/sh\n# flux: -N2\n", warn=warnings.append) == []
    assert len(warnings) == 1
