"""Batch script directives (RFC 36, as Flux's batch reads them): Flux's '# flux:' and
fluxlite's '# fluxlite:', always, whether Flux compatibility is on or not."""

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


def read(script, compat=None):
    return read_directives(script, "s.sh")


def test_flux_directives_are_always_read(monkeypatch):
    monkeypatch.delenv("FLUXLITE_FLUX_COMPAT", raising=False)
    assert read(FLUX_SCRIPT) == ["-N2", "--job-name=two", "-o", "exit-timeout=5s", "-S",
                                 "user.x=a b"]
    monkeypatch.setenv("FLUXLITE_FLUX_COMPAT", "1")
    assert read(FLUX_SCRIPT)[0] == "-N2"


def test_fluxlite_directives_are_read_either_way():
    script = "#!/bin/sh\n# fluxlite: -N2 -t 5\ntrue\n"
    assert read(script) == ["-N2", "-t", "5"]


def test_directives_start_at_the_first_one_as_in_flux():
    # RFC 36: commands before the first directive do not end the directives
    args = read("#!/bin/bash\nset -e\n# flux: -N2\n\n# flux: -n2\necho hi\n")
    assert args == ["-N2", "-n2"]


def test_other_comment_prefixes_as_in_flux():
    args = read("#!/usr/bin/env lua\n-- flux: -N2\n-- a comment\n-- flux: -n4\n")
    assert args == ["-N2", "-n4"]


@pytest.mark.parametrize("script, words", [
    ("#!/bin/sh\n# flux: -N1\necho hi\n# flux: -N2\n",
     "s.sh line 4: orphan 'flux:' directive"),
    ("#!/bin/sh\n# flux: -N1\n#flux: -N2\n", "s.sh line 3: sentinel changed"),
    ("#!/bin/sh\n# flux: -N1\n# fluxlite: -N2\n", "s.sh line 3: sentinel changed"),
    ("#!/bin/sh\n# flux: N2\n", "s.sh line 2: unknown directive 'N2'"),
    ("#!/bin/sh\n# flux: -N2 'open\n", "argument parsing failed at s.sh line 2"),
    ("#!/bin/sh\n# flux: --bogus\n", "No such option '--bogus'"),
    ("#!/bin/sh\n# flux: -N1 -q\n", "s.sh line 2: -q needs a value"),
])
def test_bad_flux_directives_are_refused(script, words):
    with pytest.raises(UsageError) as exc:
        read(script)
    assert words in exc.value.message
