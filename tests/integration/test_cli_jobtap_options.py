"""flux-jobtap(1) through the real CLI: remove, load and query of the job-manager's
built-in plugins, with their behaviour going and coming back, and Flux's errors."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.timeout(120)


def _listed(inst) -> list[str]:
    return inst.cli("jobtap", "list", "-a", check=True).stdout.split()


def test_removing_a_builtin_plugin_takes_its_behaviour_away(inst1):
    first = inst1.cli("submit", "true", check=True).stdout.strip()
    inst1.cli("jobtap", "remove", ".dependency-after", check=True)
    assert ".dependency-after" not in _listed(inst1)
    cp = inst1.cli("submit", f"--dependency=afterok:{first}", "true")
    assert cp.returncode == 1
    assert cp.stderr == 'fluxlite submit: dependency scheme "afterok" not supported\n'
    inst1.cli("submit", "--begin-time=+1h", "true", check=True)   # .begin-time: still there

    inst1.cli("jobtap", "load", ".dependency-after", check=True)
    assert ".dependency-after" in _listed(inst1)
    inst1.cli("submit", f"--dependency=afterok:{first}", "true", check=True)

    inst1.cli("jobtap", "remove", ".begin-time", check=True)
    cp = inst1.cli("submit", "--begin-time=+1h", "true")
    assert cp.returncode == 1 and 'dependency scheme "begin-time" not supported' in cp.stderr
    # load -r: remove first, then load (a glob names the plugins it removes)
    inst1.cli("jobtap", "load", "-r", ".his*", ".begin-time", check=True)
    assert _listed(inst1) == [".priority-default", ".dependency-after", ".begin-time"]
    cp = inst1.cli("job", "last")                   # job-manager.history.get is .history's
    assert cp.returncode == 1 and ".history" in cp.stderr
    inst1.cli("jobtap", "load", ".history", "conf.key=1", check=True)
    assert inst1.cli("job", "last", check=True).stdout.strip()


def test_remove_all_and_globs_spare_builtins_unless_named(inst1):
    inst1.cli("jobtap", "remove", "all", check=True)          # no plugin but built-in ones
    assert len(_listed(inst1)) == 4
    cp = inst1.cli("jobtap", "remove", "*")                   # a glob spares '.' names
    assert cp.returncode == 1 and cp.stderr.startswith("fluxlite jobtap remove: * not found")


def test_errors_and_query(inst1):
    q = json.loads(inst1.cli("jobtap", "query", ".dependency-after", check=True).stdout)
    assert q["name"] == ".dependency-after" and q["path"] == "builtin"
    assert "afterok" in q["schemes"]
    cases = [(("remove", "nosuch"), "fluxlite jobtap remove: nosuch not found"),
             (("load", "nosuch.so"), "fluxlite jobtap load: nosuch.so not found"),
             (("load", ".begin-time"), "fluxlite jobtap load: .begin-time: File exists"),
             (("remove", ".priority-default"),
              "fluxlite jobtap remove: .priority-default cannot be removed"),
             (("query", "nosuch"), "fluxlite jobtap query: nosuch: no such plugin"),
             (("load", "x.so", "novalue"), "fluxlite jobtap load: plugin configuration must "
                                           "be KEY=VALUE")]
    for args, words in cases:
        cp = inst1.cli("jobtap", *args)
        assert cp.returncode == 1, args
        assert cp.stderr.startswith(words), cp.stderr
        assert len(cp.stderr.splitlines()) == 1
    assert len(_listed(inst1)) == 4                           # nothing changed


def test_a_compiled_plugin_is_refused_clearly(inst1, tmp_path):
    so = tmp_path / "myplugin.so"
    so.write_bytes(b"\x7fELF")
    cp = inst1.cli("jobtap", "load", str(so))
    assert cp.returncode == 1 and len(cp.stderr.splitlines()) == 1
    assert "cannot load compiled jobtap plugins" in cp.stderr
