"""`kvs get` and `kvs put -A` as flux-kvs(1), through the real CLI: --count, --uniq
and --append without --watch change nothing (Flux ignores them there); a missing key
is flux-kvs's `KEY: No such file or directory`; `put -A` appends the text as typed
(a key not set becomes that string, as Flux's), and `get -w -A` on a string prints
what each append added."""

from __future__ import annotations

import subprocess

import pytest

from fluxlite.testing import fluxlite_command, one_error_line

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
    inst1.cli("kvs", "put", "lst=[]", check=True)           # a list still takes items
    inst1.cli("kvs", "put", "-A", "lst=a", "lst=2", check=True)
    assert out(inst1, "get", "lst") == '["a", 2]\n'


def test_put_append_on_a_key_not_set_makes_a_string(inst1):
    # as Flux's: the text becomes the value (not a list of one), later appends join it
    inst1.cli("kvs", "put", "-A", "new=hello", check=True)
    assert out(inst1, "get", "new") == "hello\n"
    inst1.cli("kvs", "put", "-A", "new= world", "new=!", check=True)
    assert out(inst1, "get", "new") == "hello world!\n"
    inst1.cli("kvs", "put", "-A", "d.n=[1]", check=True)    # typed text, JSON or not
    inst1.cli("kvs", "put", "-A", "d.n=2", check=True)
    assert out(inst1, "get", "d.n") == "[1]2\n"
    inst1.cli("kvs", "put", "num=5", check=True)            # Flux's values are text
    inst1.cli("kvs", "put", "-A", "num=6", check=True)
    assert out(inst1, "get", "num") == "56\n"
    cp = inst1.cli("kvs", "put", "-A", "d=x")                # a directory: refused
    assert cp.returncode == 1 and "d" in one_error_line(cp)
    assert out(inst1, "get", "d.n") == "[1]2\n"


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
