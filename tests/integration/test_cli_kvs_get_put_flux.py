"""`kvs get` and `kvs put -A` as flux-kvs(1), through the real CLI: --count, --uniq
and --append without --watch change nothing (Flux ignores them there); a missing key
is flux-kvs's `KEY: No such file or directory`; `put -A` on a string appends the
text to it, and `get -w -A` on it prints what each append added."""

from __future__ import annotations

import subprocess

import pytest

from fluxlite.testing import fluxlite_command

pytestmark = pytest.mark.timeout(120)


def out(inst, *args) -> str:
    return inst.cli("kvs", *args, check=True).stdout


def test_watch_options_without_watch_are_ignored(inst1):
    inst1.cli("kvs", "put", "a.b=1", check=True)
    assert out(inst1, "get", "-c1", "a.b") == "1\n"
    assert out(inst1, "get", "-u", "-A", "--count=3", "a.b") == "1\n"


def test_missing_key_is_flux_s_line(inst1):
    inst1.cli("kvs", "put", "a.b=1", check=True)
    for args in (("a.c",), ("-t", "a.c"), ("a.b", "a.c")):
        cp = inst1.cli("kvs", "get", *args)
        assert (cp.returncode, cp.stderr) == \
            (1, "fluxlite kvs get: a.c: No such file or directory\n"), args
    assert inst1.cli("kvs", "get", "a.b", "a.c").stdout == "1\n"   # in order, as Flux


def test_put_append_on_a_string_concatenates(inst1):
    inst1.cli("kvs", "put", "s=foo", check=True)
    inst1.cli("kvs", "put", "-A", "s=bar", check=True)
    assert out(inst1, "get", "s") == "foobar\n"
    inst1.cli("kvs", "put", "-A", "s=2", "s= x", check=True)   # in order, as text
    assert out(inst1, "get", "s") == "foobar2 x\n"
    inst1.cli("kvs", "put", "-A", "lst=a", check=True)      # a list still takes items
    inst1.cli("kvs", "put", "-A", "lst=b", check=True)
    assert out(inst1, "get", "lst") == '["a", "b"]\n'


def test_watch_append_on_a_string_prints_each_addition(inst1):
    inst1.cli("kvs", "put", "s=foo", check=True)
    w = subprocess.Popen(fluxlite_command() + ["kvs", "get", "-w", "-A", "-c", "3", "s"],
                         env=inst1.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        assert w.stdout.readline() == "foo\n"      # the value there first, whole
        inst1.cli("kvs", "put", "-A", "s=bar", check=True)
        assert w.stdout.readline() == "bar\n"
        inst1.cli("kvs", "put", "-A", "s=baz", check=True)
        rest, err = w.communicate(timeout=30)
        assert (w.returncode, rest) == (0, "baz\n"), err
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
