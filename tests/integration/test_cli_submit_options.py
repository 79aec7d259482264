"""The submission options of Flux's run, submit, batch and alloc that the audit in
docs/flux-side-by-side.md found missing, through the real CLI: -B/--bank,
--flags (debug, waitable, novalidate), --debug, --quiet on run, --list-plugins,
-S ^KEY=FILE, --jps, and batch/alloc's --conf, --dump, --input, -u, -l."""

from __future__ import annotations

import json
import tarfile

import pytest

from fluxlite.testing import jobid_of, one_error_line
from fluxlite.util import fluid

pytestmark = pytest.mark.timeout(180)


def dry(inst, *args) -> dict:
    cp = inst.cli(*args, check=True)
    return json.loads(cp.stdout)


def test_bank_flags_debug_and_setattr_from_file(inst1, tmp_path):
    (tmp_path / "attr.json").write_text('{"a": [1, 2]}')
    spec = dry(inst1, "submit", "--dry-run", "-B", "physics", "--flags=debug,novalidate",
               "--flags", "waitable", "--debug", "-S", f"^user.extra={tmp_path}/attr.json",
               "true")
    attrs = spec["attributes"]
    assert attrs["system"]["bank"] == "physics"
    assert attrs["user"]["extra"] == {"a": [1, 2]}
    # the long form, and a real submission with every flag Flux has
    cp = inst1.cli("run", "--bank=physics", "--flags=debug,waitable,novalidate", "--debug",
                   "--quiet", "echo", "hi")
    assert (cp.returncode, cp.stdout) == (0, "hi\n"), cp.stderr


def test_unknown_flag_is_one_line_naming_the_allowed(inst1):
    cp = inst1.cli("submit", "--flags=debug,bogus", "true")
    assert cp.returncode == 2
    line = one_error_line(cp)
    assert "bogus" in line and "novalidate" in line


def test_list_plugins_prints_and_exits(inst1):
    for cmd in ("run", "submit", "batch", "alloc", "bulksubmit"):
        cp = inst1.cli(cmd, "--list-plugins")
        assert cp.returncode == 0, (cmd, cp.stderr)
        assert cp.stdout.startswith("Options provided by plugins:"), cmd


def test_submit_progress_jps_is_accepted(inst1):
    cp = inst1.cli("submit", "--progress", "--jps", "--cc=1-2", "true")
    assert cp.returncode == 0, cp.stderr
    assert len(cp.stdout.split()) == 2


def test_batch_conf_becomes_broker_options(inst1, tmp_path):
    (tmp_path / "c.toml").write_text("[tbon]\ntopo = \"kary:3\"\n")
    spec = dry(inst1, "batch", "--dry-run", "-N1", "--conf", "log-level=debug",
               "--conf", str(tmp_path / "c.toml"), "--conf", '{"batch": {"persist": false}}\n',
               "--wrap", "true")
    argv = spec["tasks"][0]["command"]
    for opt in ("-Slog-level=7", "-Stbon.topo=kary:3", "-Sbatch.persist=0"):  # debug is 7
        assert opt in argv, argv
    # Flux's own spellings and tables are a valid Flux config: read as fluxlite's
    # (tbon.torpid_max is tbon.torpid-timeout), another component's table left out
    (tmp_path / "flux.toml").write_text('[tbon]\ntorpid_max = "45s"\n'
                                        '[sched-fluxion-qmanager]\nqueue-policy = "easy"\n')
    spec = dry(inst1, "batch", "--dry-run", "-N1", "--conf", str(tmp_path / "flux.toml"),
               "--wrap", "true")
    argv = spec["tasks"][0]["command"]
    assert "-Stbon.torpid-timeout=45s" in argv, argv
    assert not [a for a in argv if "fluxion" in a], argv
    # a key of a table the instance reads that it does not know: refused at submit,
    # one line (another component's table, bogus.key, is left out as a config file's)
    cp = inst1.cli("batch", "-N1", "--conf", "tbon.bogus=1", "--wrap", "true")
    assert cp.returncode != 0
    assert "tbon.bogus" in one_error_line(cp)
    cp = inst1.cli("alloc", "-N1", "--conf", "no-such-named-config", "true",
                   env={"XDG_CONFIG_HOME": str(tmp_path), "XDG_CONFIG_DIRS": str(tmp_path)})
    assert cp.returncode != 0
    assert "named config 'no-such-named-config' not found" in one_error_line(cp)


def test_batch_io_options(inst1, tmp_path):
    (tmp_path / "in.txt").write_text("x\n")
    spec = dry(inst1, "batch", "--dry-run", "-N1", "-u", "-l", "--input",
               str(tmp_path / "in.txt"), "--wrap", "true")
    shell = spec["attributes"]["system"]["shell"]["options"]
    assert shell["output.stdout.buffer.type"] == shell["output.stderr.buffer.type"] == "none"
    assert shell["output.label"] == 1
    assert shell["input.path"] == str(tmp_path / "in.txt")


def test_alloc_dump_writes_the_instance_kvs(inst1, tmp_path):
    out = tmp_path / "kvs.tgz"
    cp = inst1.cli("alloc", "-N1", f"--dump={out}", "fluxlite", "kvs", "put", "dumped=yes",
                   timeout=150)
    assert cp.returncode == 0, cp.stderr
    with tarfile.open(out) as tar:
        names = tar.getnames()
    assert any(n.endswith("dumped") for n in names), names


def test_batch_dump_default_name_keeps_the_exit_status(inst1, tmp_path):
    cp = inst1.cli("batch", "-N1", "--dump", "--wrap", "exit 3", cwd=str(tmp_path))
    assert cp.returncode == 0, cp.stderr
    jobid = jobid_of(cp)
    st = inst1.cli("job", "wait", jobid, timeout=150)
    assert st.returncode == 1 and "exit code 3" in st.stderr, st.stderr
    dumps = list(tmp_path.glob("flux-*-dump.tgz"))
    assert [p.name for p in dumps] == [f"flux-{fluid.f58(jobid)}-dump.tgz"]


def test_add_file_name_and_permissions(inst1):
    cp = inst1.cli("run", "--add-file=run.sh:0750=#!/bin/sh\necho ran\n", "sh", "-c",
                   'stat -c %a "$FLUXLITE_JOB_TMPDIR/run.sh" && "$FLUXLITE_JOB_TMPDIR/run.sh"')
    assert (cp.returncode, cp.stdout) == (0, "750\nran\n"), cp.stderr
    cp = inst1.cli("run", "--add-file=x:rwx=a\nb", "true")
    assert "invalid permissions 'rwx'" in one_error_line(cp)
