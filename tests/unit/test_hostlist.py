"""RFC 29 hostlists: expansion, zero padding, order, and folding back."""

import pytest

from fluxlite.util import hostlist


@pytest.mark.parametrize("text,hosts", [
    ("", []),
    ("node0", ["node0"]),
    ("node[0-3]", ["node0", "node1", "node2", "node3"]),
    ("node[1,3-5]", ["node1", "node3", "node4", "node5"]),
    ("a,b", ["a", "b"]),
    ("n[00-02]", ["n00", "n01", "n02"]),
    ("n[08-10]", ["n08", "n09", "n10"]),
    ("n[9-10]", ["n9", "n10"]),
    ("foo[3,1]", ["foo3", "foo1"]),                 # order is kept
    ("rack[1-2]-ib,login", ["rack1-ib", "rack2-ib", "login"]),
    ("x[1-2],x[1]", ["x1", "x2", "x1"]),            # repeats are kept
    (" a , b[0-1] ", ["a", "b0", "b1"]),
])
def test_decode(text, hosts):
    assert hostlist.decode(text) == hosts


def test_zero_padding_spans_widths():
    hosts = hostlist.decode("n[00-10]")
    assert hosts == [f"n{i:02d}" for i in range(11)]
    assert hostlist.encode(hosts) == "n[00-10]"


@pytest.mark.parametrize("bad,why", [
    ("node[", "not closed"), ("node]", "without"), ("node[1-]", "expected numbers"),
    ("node[a]", "expected numbers"), ("node[3-1]", "reversed"), ("a,,b", "empty host"),
    ("n[1[2]]", "nest"), ("n[1]x[2]", "one bracket"), ("[1-3]", "no name"),
    ("n[0-2000000]", "more than"), (5, "must be a string"),
])
def test_decode_rejects(bad, why):
    with pytest.raises(ValueError, match=why):
        hostlist.decode(bad)


@pytest.mark.parametrize("hosts,text", [
    ([], ""),
    (["node0"], "node0"),
    (["node0", "node1", "node2", "node3"], "node[0-3]"),
    (["node1", "node3", "node4", "node5"], "node[1,3-5]"),
    (["a", "b"], "a,b"),
    (["n08", "n09", "n10"], "n[08-10]"),
    (["n1", "n01"], "n1,n01"),                      # different paddings stay apart
    (["n05", "n7"], "n05,n7"),
    (["foo0", "foo1", "foo18", "foo4"], "foo[0-1,18,4]"),
    (["r1-ib", "r2-ib", "r3-eth"], "r[1-2]-ib,r3-eth"),
    (["1", "2"], "1,2"),
])
def test_encode(hosts, text):
    assert hostlist.encode(hosts) == text
    assert hostlist.decode(text) == hosts


@pytest.mark.parametrize("bad", ["", "a,b", "n[1]", None])
def test_encode_rejects_names_that_are_not_names(bad):
    with pytest.raises(ValueError):
        hostlist.encode([bad])


def test_round_trip_of_mixed_lists():
    hosts = ["login", "n000", "n001", "n099", "n100", "n1000", "gpu7", "gpu8", "n002"]
    assert hostlist.decode(hostlist.encode(hosts)) == hosts


def test_of_ranks_names_the_hosts_of_some_ranks():
    hosts = ["n0", "n0", "n1", "n1", "gpu"]       # rank -> host, as the hostlist attribute
    assert hostlist.of_ranks(hosts, [0, 1]) == "n[0,0]"
    assert hostlist.of_ranks(hosts, [1, 2, 4]) == "n[0-1],gpu"
    assert hostlist.of_ranks(hosts, []) == ""
