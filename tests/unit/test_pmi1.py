"""The PMI-1 simple wire protocol server (fluxlite/pmi/pmi1.py): every command,
garbage, a missing key, a double init, the barrier and a task leaving early."""

import pytest

from fluxlite.errors import ProtocolError
from fluxlite.pmi.pmi1 import (
    LINE_MAX,
    Abort,
    Answer,
    Barrier,
    Close,
    Log,
    PMI1Server,
    decode,
    encode,
)

pytestmark = pytest.mark.timeout(10)


def words(effect) -> dict:
    assert isinstance(effect, Answer), effect
    line = effect.data.decode()
    assert line.endswith("\n") and line.count("\n") == 1
    cmd, args = decode(effect.data[:-1])
    return dict(args, cmd=cmd)


def server(ranks=(0, 1), size=2):
    return PMI1Server(kvsname="f3Kv", size=size, ranks=list(ranks))


def init(s, rank):
    [a] = s.feed(rank, b"cmd=init pmi_version=1 pmi_subversion=1\n")
    return words(a)


def ask(s, rank, line: bytes) -> dict:
    a, *logs = s.feed(rank, line)
    assert all(isinstance(x, Log) for x in logs)
    return words(a)


def test_codec_round_trip_and_malformed_lines():
    assert encode("put_result", [("rc", 0)]) == b"cmd=put_result rc=0\n"
    assert decode(b"cmd=put kvsname=k key=a value=b=c") == \
        ("put", {"kvsname": "k", "key": "a", "value": "b=c"})
    assert decode(b"mcmd=spawn nprocs=2")[0] == "spawn"
    for bad in (b"", b"put key=a", b"cmd= key=a", b"cmd=put key", b"=x cmd=a", b"\xff\xfe"):
        with pytest.raises(ProtocolError):
            decode(bad)


def test_init_answers_version_1_1_and_refuses_version_2():
    s = server()
    assert init(s, 0) == {"cmd": "response_to_init", "rc": "0", "pmi_version": "1",
                          "pmi_subversion": "1"}
    again = init(s, 0)          # a second init is answered the same way
    assert again["rc"] == "0"
    two = ask(s, 1, b"cmd=init pmi_version=2 pmi_subversion=0\n")
    assert two["cmd"] == "response_to_init" and two["rc"] == "-1" and two["msg"]


def test_info_commands():
    s = server()
    init(s, 0)
    assert ask(s, 0, b"cmd=get_maxes\n") == {"cmd": "maxes", "rc": "0", "kvsname_max": "64",
                                             "keylen_max": "64", "vallen_max": "1024"}
    assert ask(s, 0, b"cmd=get_appnum\n") == {"cmd": "appnum", "rc": "0", "appnum": "0"}
    assert ask(s, 0, b"cmd=get_my_kvsname\n") == {"cmd": "my_kvsname", "rc": "0",
                                                  "kvsname": "f3Kv"}
    assert ask(s, 0, b"cmd=get_universe_size\n") == {"cmd": "universe_size", "rc": "0",
                                                     "size": "2"}
    assert ask(s, 0, b"cmd=finalize\n") == {"cmd": "finalize_ack", "rc": "0"}


def test_commands_before_init_unsupported_and_unknown_get_rc_minus_1():
    s = server()
    early = ask(s, 0, b"cmd=get_maxes\n")
    assert early["rc"] == "-1" and "before_init" in early["msg"]
    init(s, 0)
    for line, answer in ((b"cmd=publish_name service=a port=b\n", "publish_name_result"),
                         (b"cmd=lookup_name service=a\n", "lookup_name_result"),
                         (b"mcmd=spawn nprocs=1 execname=x\n", "spawn_result"),
                         (b"cmd=frobnicate\n", "error"),
                         (b"garbage\n", "error")):
        got = ask(s, 0, line)
        assert got["cmd"] == answer and got["rc"] == "-1" and got["msg"], line
    # garbage is worth one log line per task, not one per line
    assert [x for x in s.feed(0, b"junk\njunk\n") if isinstance(x, Log)] == []
    # still served afterwards
    assert ask(s, 0, b"cmd=get_appnum\n")["rc"] == "0"


def test_put_barrier_get_and_a_missing_key():
    s = server()
    init(s, 0)
    init(s, 1)
    assert ask(s, 0, b"cmd=put kvsname=f3Kv key=card0 value=tcp://a\n") == \
        {"cmd": "put_result", "rc": "0"}
    assert ask(s, 1, b"cmd=put kvsname=f3Kv key=card1 value=tcp://b\n")["rc"] == "0"
    # not visible before the barrier
    assert ask(s, 1, b"cmd=get kvsname=f3Kv key=card0\n")["rc"] == "-1"
    assert s.feed(0, b"cmd=barrier_in\n") == []
    [b] = s.feed(1, b"cmd=barrier_in\n")
    assert b == Barrier({"card0": "tcp://a", "card1": "tcp://b"})
    answers = s.barrier_done({"card0": "tcp://a", "card1": "tcp://b", "card2": "tcp://c"})
    assert sorted(a.rank for a in answers) == [0, 1]
    assert all(words(a) == {"cmd": "barrier_out", "rc": "0"} for a in answers)
    assert ask(s, 0, b"cmd=get kvsname=f3Kv key=card2\n") == \
        {"cmd": "get_result", "rc": "0", "value": "tcp://c"}
    missing = ask(s, 0, b"cmd=get kvsname=f3Kv key=nobody\n")
    assert missing["cmd"] == "get_result" and missing["rc"] == "-1"
    assert "not_found" in missing["msg"]
    # the next barrier carries only what was put since
    ask(s, 0, b"cmd=put kvsname=f3Kv key=x value=1\n")
    s.feed(0, b"cmd=barrier_in\n")
    assert s.feed(1, b"cmd=barrier_in\n") == [Barrier({"x": "1"})]


def test_bounds_on_keys_values_kvsname_and_lines():
    s = server()
    init(s, 0)
    assert ask(s, 0, b"cmd=put kvsname=f3Kv key=" + b"k" * 65 + b" value=v\n")["rc"] == "-1"
    assert ask(s, 0, b"cmd=put kvsname=f3Kv key=k value=" + b"v" * 1025 + b"\n")["rc"] == "-1"
    assert ask(s, 0, b"cmd=put kvsname=other key=k value=v\n")["rc"] == "-1"
    assert ask(s, 0, b"cmd=put kvsname=f3Kv key=k\n")["rc"] == "-1"
    # a line split across reads is fine; an endless one closes the connection
    assert s.feed(0, b"cmd=get_ap") == []
    assert words(s.feed(0, b"pnum\n")[0])["appnum"] == "0"
    out = s.feed(0, b"x" * (LINE_MAX + 10))
    assert isinstance(out[0], Close) and "longer" in out[0].why
    # it spoke PMI and can enter no barrier now: the job's barrier fails at once
    assert len(out) == 2 and isinstance(out[1], Barrier) and out[1].gone_rank == 0
    assert s.feed(0, b"cmd=get_appnum\n") == []       # closed: nothing more


def test_abort_carries_rank_code_and_message():
    s = server()
    init(s, 1)
    assert s.feed(1, b"cmd=abort exitcode=3\n") == [Abort(1, 3, "")]
    assert s.feed(1, b"cmd=abort exit_code=5 error_msg=bad\n") == [Abort(1, 5, "bad")]


def test_a_task_leaving_releases_the_others_from_the_barrier_with_an_error():
    s = server(ranks=(0, 1, 2), size=3)
    for r in (0, 1, 2):
        init(s, r)
    assert s.feed(0, b"cmd=barrier_in\n") == []
    out = s.feed(2, b"")
    assert out[0] == Close(2, "closed its PMI connection before finalize", eof=True)
    assert out[1] == Barrier({}, error="task rank 2 left before the barrier", gone_rank=2)
    [a] = out[2:]
    assert a.rank == 0 and words(a)["rc"] == "-1" and "rank_2" in words(a)["msg"]
    # a later entrant learns at once that the barrier cannot complete
    [b] = s.feed(1, b"cmd=barrier_in\n")
    assert words(b)["cmd"] == "barrier_out" and words(b)["rc"] == "-1"


def test_a_finalized_task_closing_is_quiet():
    s = server(ranks=(0,), size=1)
    init(s, 0)
    ask(s, 0, b"cmd=finalize\n")
    assert s.feed(0, b"") == [Close(0, "", eof=True)]


def test_a_task_that_never_spoke_pmi_leaves_quietly():
    s = server()
    assert s.feed(1, b"") == [Close(1, "", eof=True)]


def test_process_mapping_is_mpichs_node_map_for_block_placement():
    from fluxlite.job.taskmap import block, pmi_mapping

    def process_mapping(counts):
        return pmi_mapping(block(counts))
    assert process_mapping([2, 2]) == "(vector,(0,2,2))"
    assert process_mapping([4]) == "(vector,(0,1,4))"
    assert process_mapping([3, 3, 1]) == "(vector,(0,2,3),(2,1,1))"
