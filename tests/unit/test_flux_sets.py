"""flux.idset.IDset and flux.hostlist.Hostlist (fluxlite's `flux` package), the
classes Flux programs build rank and host sets with."""

import errno

import pytest

from fluxlite.compat.python.flux import hostlist, idset

pytestmark = pytest.mark.timeout(30)


def test_idset_reads_changes_and_combines():
    ids = idset.IDset("0-3,7")
    assert (str(ids), repr(ids), len(ids), list(ids)) == ("0-3,7", "IDset('0-3,7')", 5,
                                                          [0, 1, 2, 3, 7])
    ids[5] = True
    ids.clear(1, 2)
    assert str(ids) == "0,3,5,7" and ids[5] and not ids[1]
    assert (ids.first(), ids.last(), ids.next(3), ids.next(7)) == (0, 7, 5,
                                                                  idset.IDSET_INVALID_ID)
    ids.set_flags(idset.IDSET_FLAG_BRACKETS | idset.IDSET_FLAG_RANGE)
    assert str(idset.IDset("0-3", flags=idset.IDSET_FLAG_BRACKETS)) == "[0,1,2,3]"
    a = idset.decode("0-10")
    assert str(a - "2-8") == "0-1,9-10" and str(a & [1, 2, 40]) == "1-2"
    assert str(a.union("20", [30])) == "0-10,20,30" and a == idset.IDset(list(range(11)))
    with pytest.raises(ValueError):
        a.set(5, 1)
    with pytest.raises(ValueError):
        a.__contains__(-1)
    with pytest.raises(TypeError):
        a.equal("0-10")
    with pytest.raises(OSError) as exc:
        idset.decode("1-x")
    assert exc.value.errno == errno.EINVAL


def test_hostlist_keeps_order_and_folds():
    hl = hostlist.decode("foo[0-3]")
    assert (len(hl), hl[-1], list(hl[1:3]), repr(hl)) == (4, "foo3", ["foo1", "foo2"],
                                                         "Hostlist('foo[0-3]')")
    assert list(hl[idset.IDset("0,2")]) == ["foo0", "foo2"]
    assert hl.append(["foo9", "bar"]) == 2 and str(hl) == "foo[0-3,9],bar"
    assert hl.delete("foo[1-2]") == 2 and str(hl) == "foo[0,3,9],bar"
    assert hl.index("foo[3,9]") == [1, 2] and hl.index("foo7", ignore_nomatch=True) == []
    with pytest.raises(FileNotFoundError):
        hl.find("foo7")
    assert str(hostlist.decode("n[10,2,2]").uniq()) == "n[2,10]"
    for bad in ("foo[", "foo[x-y]", "[]"):
        with pytest.raises(ValueError):
            hostlist.decode(bad)
    with pytest.raises(TypeError):
        hostlist.decode(["foo1", 42])


R4 = {"version": 1, "execution": {
    "R_lite": [{"rank": "0-3", "children": {"core": "0-3", "gpu": "0"}}],
    "starttime": 0, "expiration": 0, "nodelist": ["n[0-3]"],
    "properties": {"big": "2-3"}}}


def test_resource_set_ops_properties_and_constraints():
    from fluxlite.compat.python.flux.resource import ResourceSet
    rs = ResourceSet(R4)
    assert (str(rs), rs.ncores, rs.ngpus, str(rs.nodelist)) == ("rank[0-3]/core[0-3],gpu0",
                                                              16, 4, "n[0-3]")
    half = rs.copy_ranks("0-1")
    assert str(rs - half) == "rank[2-3]/core[0-3],gpu0" and str(rs & half) == str(half)
    one = ResourceSet({"version": 1, "execution": {
        "R_lite": [{"rank": "0", "children": {"core": "0"}}]}})
    assert (rs - one).ncores == 15 and str(rs - one).startswith("rank0/core[1-3],gpu0 ")
    assert str(rs.copy_constraint({"properties": ["big"]}).ranks) == "2-3"
    assert str(rs.copy_constraint({"not": [{"hostlist": ["n[0-2]"]}]}).ranks) == "3"
    assert rs.host_ranks("n[1,3]") == [1, 3]
    back = ResourceSet(rs.encode())
    assert str(back) == str(rs) and back.get_properties() == '{"big": "2-3"}'
    for bad in ({"color": []}, {"not": []}, {"and": {}}):
        with pytest.raises(ValueError):
            rs.copy_constraint(bad)
    with pytest.raises(ValueError):
        rs.set_property("x", "0-9")
    with pytest.raises(ValueError):
        ResourceSet({"version": 2})


def test_constraint_parser_builds_rfc31_objects():
    from fluxlite.compat.python.flux.constraint.parser import (
        ConstraintParser,
        ConstraintSyntaxError,
    )

    class Props(ConstraintParser):
        operator_map = {None: "properties", "host": "hostlist"}
        split_values = {"properties": ","}
        combined_terms = {"properties"}

    p = Props()
    assert p.parse("a,b") == {"properties": ["a", "b"]}
    assert p.parse("a and (host:n[1-2] | -c)") == {"and": [
        {"properties": ["a"]}, {"or": [{"hostlist": ["n[1-2]"]},
                                      {"not": [{"properties": ["c"]}]}]}]}
    assert p.parse("a b") == {"properties": ["a", "b"]}
    assert p.parse("name:'x y'") == {"name": ["x y"]}
    for bad in ("a|", "(a", "a)", "-(a)", "x:", "'open"):
        with pytest.raises(ConstraintSyntaxError):
            p.parse(bad)
    with pytest.raises(ConstraintSyntaxError):
        ConstraintParser().parse("bare")


def test_rv1pool_allocates_worst_fit_frees_and_refuses():
    from fluxlite.compat.python.flux.resource import (
        InfeasibleRequest,
        InsufficientResources,
        Rv1Pool,
    )
    R = {"version": 1, "execution": {
        "R_lite": [{"rank": "0", "children": {"core": "0-3"}},
                   {"rank": "1-2", "children": {"core": "0-1", "gpu": "0"}}],
        "nodelist": ["a", "b", "c"], "properties": {"+local": "0-2", "gpu": "1-2"}}}
    pool = Rv1Pool(R)
    spec = {"version": 1, "resources": [{"type": "node", "count": 2, "with": [
        {"type": "slot", "count": 1, "with": [{"type": "core", "count": 1},
                                               {"type": "gpu", "count": 1}]}]}],
        "tasks": [], "attributes": {"system": {"duration": 60.0}}}
    req = pool.parse_resource_request(spec)
    assert (req.nnodes, req.nslots, req.slot_size, req.gpu_per_slot) == (2, 2, 1, 1)
    got = pool.alloc(7, req)
    assert got.dumps() == "rank[1-2]/core0,gpu0" and "+local" not in got._properties
    assert got.to_dict()["execution"]["nslots"] == 2
    with pytest.raises(InsufficientResources):
        pool.alloc(8, req)
    one = pool.parse_resource_request({**spec, "resources": [
        {"type": "slot", "count": 1, "with": [{"type": "core", "count": 1}]}]})
    assert pool.alloc(9, one).dumps() == "rank0/core0"     # the most free cores
    pool.free(7)
    assert pool.alloc(10, req).dumps() == "rank[1-2]/core0,gpu0"
    with pytest.raises(InfeasibleRequest):
        pool.check_feasibility(pool.parse_resource_request({**spec, "resources": [
            {"type": "slot", "count": 1, "with": [{"type": "core", "count": 5}]}]}))
    with pytest.raises(ValueError, match="duration"):
        pool.parse_resource_request({**spec, "attributes": {"system": {}}})
