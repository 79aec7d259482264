"""A broker's placement: frozen, and the same shape whichever bootstrap made it."""

import dataclasses

import pytest

from fluxlite.broker import boot_config
from fluxlite.broker.placement import BrokerConfig, local_placement
from fluxlite.util import tree


def test_the_local_launcher_places_ranks_on_a_kary_tree_of_ipc_sockets():
    topology = tree.Topology.kary(4, 2)
    hosts = ("h",) * 4
    p0, p1, p3 = (local_placement(r, topology, "/run/x", hosts) for r in (0, 1, 3))
    assert (p0.rank, p0.size, p0.parent, p0.children) == (0, 4, None, (1, 2))
    assert p0.bind_endpoint == "ipc:///run/x/tbon-0" and p0.parent_endpoint is None
    assert (p1.parent, p1.children, p1.parent_endpoint) == (0, (3,), "ipc:///run/x/tbon-0")
    assert p3.bind_endpoint is None                  # a leaf listens for nobody
    assert p3.parent_endpoint == "ipc:///run/x/tbon-1"
    assert p3.parent_key is None and p3.curve is None and not p3.insecure


def test_a_placement_and_a_broker_config_cannot_be_changed_after_the_bootstrap():
    place = local_placement(0, tree.Topology.kary(1, 2), "/run/x", ("h",))
    cfg = BrokerConfig(place, attrs={}, rundir="/run/x", local_path="/run/x/local-0")
    with pytest.raises(dataclasses.FrozenInstanceError):
        place.rank = 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.placement = place
    assert (cfg.rank, cfg.size) == (0, 1)


def test_the_config_file_bootstrap_gives_the_same_placement_shape():
    config = boot_config.parse({"curve_cert": "/c.cert", "default_port": 8050,
                                "default_bind": "tcp://*:%p",
                                "default_connect": "tcp://%h:%p",
                                "hosts": [{"host": "n[0-2]"}, {"host": "n3", "parent": "n1"}]})
    p3 = config.place("n3")
    assert (p3.rank, p3.size, p3.parent, p3.children) == (3, 4, 1, ())
    assert p3.parent_endpoint == "tcp://n1:8050"
    assert p3.hosts == ("n0", "n1", "n2", "n3")
    assert config.place("n1").children == (3,)
    assert boot_config.uses_tcp(p3)
