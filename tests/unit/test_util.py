"""Pure helpers: idsets, durations, tree math, job ids."""

import pytest

from fluxlite.util import fluid, fsd, idset, tree


@pytest.mark.parametrize("text,ids", [
    ("", set()), ("3", {3}), ("0-2,5", {0, 1, 2, 5}), ("[1-3]", {1, 2, 3}), ("7,7", {7}),
])
def test_idset_decode(text, ids):
    assert idset.decode(text) == ids


@pytest.mark.parametrize("bad", ["foo", "1-", "-1", "3-1", "1,,2", "1.5", "0x3", 5])
def test_idset_rejects_garbage(bad):
    with pytest.raises(ValueError):
        idset.decode(bad)


def test_idset_encode_collapses_ranges():
    assert idset.encode([5, 0, 1, 2, 9, 10]) == "0-2,5,9-10"
    assert idset.encode([]) == ""
    assert idset.decode(idset.encode(range(100))) == set(range(100))


@pytest.mark.parametrize("text,secs", [
    ("30s", 30), ("2m", 120), ("0.5h", 1800), ("1d", 86400), ("100", 100), ("42.34", 42.34),
    ("500ms", 0.5), (1.5, 1.5),
])
def test_fsd_parse(text, secs):
    assert fsd.parse(text) == pytest.approx(secs)


@pytest.mark.parametrize("bad", ["aaa", "false", "-1", "1x", "", "inf", "nan", "1_0", True])
def test_fsd_rejects(bad):
    with pytest.raises(fsd.FSDError):
        fsd.parse(bad)


def test_fsd_none_means_no_timeout():
    assert fsd.parse_timeout("none") is None
    assert fsd.parse_timeout("NONE") is None
    assert fsd.parse_timeout("1s") == 1.0


def test_fsd_format():
    assert fsd.format(30) == "30s"
    assert fsd.format(90) == "1.5m"
    assert fsd.format(None) == "none"
    assert fsd.format(0.05) == "50ms"


def test_tree_kary2():
    # 0 -> 1,2 ; 1 -> 3,4 ; 2 -> 5,6
    assert tree.children(0, 7, 2) == [1, 2]
    assert tree.children(1, 7, 2) == [3, 4]
    assert tree.parent(6, 2) == 2
    assert tree.descendants(1, 7, 2) == [3, 4]
    assert tree.next_hop(0, 6, 2) == 2
    assert tree.next_hop(1, 6, 2) is None
    assert tree.level(6, 2) == 2
    assert tree.interior_ranks(7, 2) == [0, 1, 2]
    assert tree.critical_ranks(4, 2) == [0, 1]


def test_tree_flat_and_default():
    assert tree.children(0, 5, 0) == [1, 2, 3, 4]
    assert tree.parent(4, 0) == 0
    assert tree.critical_ranks(16, 32) == [0]
    assert tree.parse_topo("kary:32") == 32


@pytest.mark.parametrize("bad", ["kary", "kary:-1", "kary:x", "binomial", "", None])
def test_tree_bad_topo(bad):
    with pytest.raises(ValueError):
        tree.parse_topo(bad)


def test_fluid_roundtrip_and_order():
    gen = fluid.FluidGenerator(0)
    ids = [gen.generate() for _ in range(2000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    for i in ids[:50]:
        assert fluid.parse(fluid.f58(i)) == i
        assert fluid.parse(fluid.f58(i, ascii_only=True)) == i
        assert fluid.parse(str(i)) == i
        assert fluid.parse(fluid.dothex(i)) == i
        assert fluid.parse(hex(i)) == i


def test_fluid_known_values():
    # flux-core's own example: ƒ2fEnP1H is 63166218240 (outputs.md)
    assert fluid.parse("ƒ2fEnP1H") == 63166218240
    assert fluid.f58(63166218240, ascii_only=False) == "ƒ2fEnP1H"
    assert fluid.f58_plain(63166218240) == "f2fEnP1H"


def test_fluid_words_bit_layout():
    """Flux spells the id's eight bytes little-endian: byte 0 leads the first group."""
    one = fluid.words(1)
    assert one.split("--")[1] == "academy-academy-academy"
    assert one.split("--")[0] != "academy-academy-academy"
    assert fluid.words(1 << 32).split("--")[0] == "academy-academy-academy"
    for value in (0, 1, 255, 1 << 32, 0x0123456789abcdef, 2**64 - 1):
        assert fluid.parse(fluid.words(value)) == value
    for bad in ("academy", "academy-academy-academy", "nosuchword-academy-academy"):
        with pytest.raises(ValueError):
            fluid.parse_words(bad)


def test_fluid_emoji_is_base_576_most_significant_first():
    """RFC 19: digit 0 is U+1F603, digit 1 U+1F604; 2**64-1 takes seven digits."""
    assert fluid.emoji(0) == "\U0001F603" and fluid.emoji(1) == "\U0001F604"
    assert fluid.emoji(576) == "\U0001F604\U0001F603"
    assert len(fluid.emoji(2**64 - 1)) == 7
    for value in (0, 1, 575, 576, 65535, 0x0123456789abcdef, 2**64 - 1):
        assert fluid.parse(fluid.emoji(value)) == value
    # RFC 19's decoding rule: a leading F0 9F sequence means emoji; a stray one is refused
    for bad in ("\U0001F603x", "\U0001F9FF", fluid.emoji(2**64 - 1) + "\U0001F603"):
        with pytest.raises(ValueError):
            fluid.parse(bad)
    with pytest.raises(ValueError):
        fluid.emoji(-1)


@pytest.mark.parametrize("bad", ["nosuchjob", "ƒ0OIl", "", "1.2.3", "f"])
def test_fluid_rejects(bad):
    with pytest.raises(ValueError):
        fluid.parse(bad)


def test_readline_returns_every_line_of_one_write():
    """Two lines written at once are two lines (a buffered readline once hid the second)."""
    import os

    from fluxlite.testing import _readline
    r, w = os.pipe()
    with os.fdopen(r, "rb") as stream:
        os.write(w, b"ready\nready\npartial")
        assert _readline(stream, 5) == "ready\n"
        assert _readline(stream, 5) == "ready\n"
        assert _readline(stream, 0.05) == ""      # no newline yet: a timeout
        os.close(w)
        assert _readline(stream, 5) == "partial"  # end of file


def test_layout_of_exclusive_slots_runs_the_slots_asked_for():
    """-x -n1 / -x -n3 on 2-core nodes: whole nodes, but 1 and 3 tasks (not 2 and 4)."""
    from fluxlite.job import jobspec as js
    from fluxlite.job import rset
    from fluxlite.job import schema as jschema
    for n, want in ((1, [1]), (3, [2, 1])):
        spec = js.Jobspec.from_command(["true"], num_tasks=n, num_nodes=None, cores_per_task=1,
                                       exclusive=True).jobspec
        alloc = {r: [0, 1] for r in range(len(want))}
        assert rset.layout(jschema.request(spec), alloc) == want


def test_topology_kary_matches_the_functions():
    for size, k in ((1, 2), (7, 2), (16, 32), (40, 3), (9, 0)):
        t = tree.Topology.kary(size, k)
        for r in range(size):
            assert t.parent(r) == tree.parent(r, k)
            assert t.children(r) == tree.children(r, size, k)
            assert t.descendants(r) == tree.descendants(r, size, k)
            assert t.level(r) == tree.level(r, k)
            for target in range(size):
                assert t.next_hop(r, target) == tree.next_hop(r, target, k)
        assert t.critical_ranks() == tree.critical_ranks(size, k)


def test_topology_from_a_config_parents_list():
    t = tree.Topology([None, 0, 0, 1, 1, 2])          # 0 -> 1, 2; 1 -> 3, 4; 2 -> 5
    assert t.children(1) == [3, 4] and t.descendants(0) == [1, 2, 3, 4, 5]
    assert t.next_hop(0, 4) == 1 and t.next_hop(1, 5) is None and t.maxlevel == 2
    assert t.critical_ranks() == [0, 1, 2]
    for bad in ([None, 2, 1], [0, None], [None, 5], [None, 1]):
        with pytest.raises(ValueError):
            tree.Topology(bad)


# ------------------------------------------------------------------ mustache
def test_mustache_render_and_check():
    from fluxlite.util import mustache
    values = mustache.job_values(1234, name="sim", nnodes=2, size=4, tmpdir="/t")
    values.update(mustache.task_values(3, 1))
    assert mustache.render("{{id.dec}}.{{ name }}.{{nnodes}}.{{size}}.{{taskid}}.{{task.index}}"
                           ".{{tmpdir}}", values) == "1234.sim.2.4.3.1./t"
    assert mustache.render("{{script}} {{a", values) == "{{script}} {{a"
    assert mustache.per_task("o.{{taskid}}") and not mustache.per_task("o.{{id}}")
    mustache.check("{{id}}{{jobid.hex}}{{node.name}}", "--output")
    with pytest.raises(ValueError, match=r"--error: unknown mustache template '\{\{x\}\}'"):
        mustache.check("a{{x}}", "--error")


def test_log_sink_owns_its_ring(tmp_path):
    import json

    import structlog

    from fluxlite.util import log
    sink = log.configure(3, str(tmp_path / "b.log"), stderr_level="critical", ring_size=2)
    try:
        for i in range(3):
            log.get_logger("test").info("entry", i=i)
        got = sink.entries()
        assert [e["i"] for e in got] == [1, 2] and {e["rank"] for e in got} == {3}
        assert [json.loads(x)["i"] for x in (tmp_path / "b.log").read_text().splitlines()] \
            == [0, 1, 2]
        other = log.configure(4, stderr_level="critical")
        log.get_logger("test").info("later")
        assert [e["event"] for e in other.entries()] == ["later"] and len(sink.entries()) == 2
        other.clear()
        assert other.entries() == []
    finally:
        sink.file.close()
        structlog.reset_defaults()


def test_log_level_is_checked_before_anything_is_built(tmp_path):
    """A logger below `log-level` builds nothing (a debug line on a hot path costs
    an attribute read); set_levels changes the threshold of loggers made before."""
    import structlog

    from fluxlite.util import log
    sink = log.configure(0, stderr_level="critical", level="info")
    try:
        lg = log.get_logger("test")
        calls = []

        class Costly:
            def __str__(self):
                calls.append(1)
                return "built"
        lg.debug("hidden", value=Costly())
        assert sink.entries() == [] and calls == [] and not log.enabled("debug")
        sink.set_levels(level="debug")
        lg.debug("shown", value=Costly())
        assert [e["event"] for e in sink.entries()] == ["shown"] and calls == [1]
        assert sink.entries()[0]["component"] == "test" and log.enabled("debug")
        sink.set_levels(level="error")
        lg.warning("hidden too")
        lg.error("kept")
        assert [e["event"] for e in sink.entries()] == ["shown", "kept"]
    finally:
        structlog.reset_defaults()
        log.configure(None, stderr_level="critical")  # the default threshold again
        structlog.reset_defaults()


def test_release_free_memory_runs_on_glibc():
    import platform

    from fluxlite.util import procs
    ran = procs.release_free_memory()
    assert ran is (platform.libc_ver()[0] == "glibc")


def test_start_time_and_session_name_a_live_process_only():
    import os
    import subprocess

    from fluxlite.util import procs
    me = os.getpid()
    assert procs.session_of(me) == os.getsid(0)
    assert procs.start_time(me) == procs.start_time(me) is not None
    p = subprocess.Popen(["true"])
    p.wait(timeout=10)
    assert procs.start_time(p.pid) is None and procs.session_of(p.pid) is None
