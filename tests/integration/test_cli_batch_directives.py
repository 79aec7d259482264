"""RFC 36 directives in batch scripts as Flux reads them, through the real CLI: a
value between triple quotes at line ends spans directive lines (as Flux's man page
gives a --conf TOML table), paired triple quotes on one line are one word, and an
unclosed or unterminated one is one error line naming its line."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.timeout(120)

MULTI = '''#!/bin/sh
# flux: -N1
# flux: --setattr=user.note="""
# flux: line one
# flux:   line two
# flux: """
# flux: --conf="""
# flux: [tbon]
# flux: topo = "kary:2"
# flux: """
# flux: -S user.inline="""a 'b' c"""
fluxlite getattr tbon.topo
'''


def dry(inst, script) -> dict:
    return json.loads(inst.cli("batch", "--dry-run", script, check=True).stdout)


def test_multi_line_directive_values(inst1, tmp_path):
    script = tmp_path / "multi.sh"
    script.write_text(MULTI)
    spec = dry(inst1, script)
    assert spec["attributes"]["user"] == {"note": "line one\n  line two\n",
                                          "inline": "a 'b' c"}
    assert "-Stbon.topo=kary:2" in spec["tasks"][0]["command"]
    out = tmp_path / "multi.out"
    jobid = inst1.cli("batch", f"--output={out}", script, check=True).stdout.strip()
    inst1.cli("job", "wait", jobid, check=True, timeout=120)
    assert out.read_text() == "kary:2\n"


@pytest.mark.parametrize("lines, why", [
    (['# flux: -S user.x="""', "# flux: b"], "line 4: unterminated multi-line quote at line 2"),
    (['# flux: -S user.x="""a""" b"""'], "line 2: unclosed triple quote"),
])
def test_bad_triple_quotes_are_one_line(inst1, tmp_path, lines, why):
    script = tmp_path / "bad.sh"
    script.write_text("\n".join(["#!/bin/sh", *lines, "", "hostname", ""]))
    cp = inst1.cli("batch", "--dry-run", script)
    assert cp.returncode != 0 and why in cp.stderr and len(cp.stderr.splitlines()) == 1, \
        cp.stderr
