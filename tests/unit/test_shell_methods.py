"""Shell plugins serve methods through the one dispatcher's @handler, with schemas."""

from __future__ import annotations

import pytest

from fluxlite.errors import ProtocolError, UsageError
from fluxlite.protocol.dispatch import OWNER, declared_methods, parse
from fluxlite.protocol.message import Message
from fluxlite.shell import plugin as plugin_mod
from fluxlite.shell.plugins.pty import Pty, PtyAttach, PtyResize, PtyWrite

pytestmark = pytest.mark.timeout(30)


def test_pty_declares_its_methods_with_schemas_owner_only():
    methods = {m.topic: m for m in declared_methods(Pty(shell=None))}
    assert set(methods) == {"pty-attach", "pty-write", "pty-resize", "pty-detach",
                            "disconnect"}
    assert methods["pty-attach"].streaming
    assert methods["pty-attach"].schema is PtyAttach
    assert methods["pty-write"].schema is PtyWrite
    assert methods["pty-resize"].schema is PtyResize
    assert all(m.roles == OWNER for m in methods.values())


@pytest.mark.parametrize("payload, err", [
    ({"rows": 0, "cols": 80}, UsageError),         # out of range
    ({"rows": 1 << 16, "cols": 80}, UsageError),   # wider than a winsize field
    ({"rows": "24", "cols": 80}, ProtocolError),   # wrong type
])
def test_pty_resize_payload_is_checked(payload, err):
    with pytest.raises(err, match="pty-resize"):
        parse(Message.request("s.pty-resize", payload), PtyResize)


def test_pty_write_takes_bytes_only():
    assert parse(Message.request("s.pty-write", {"data": b"ls\n"}), PtyWrite).data == b"ls\n"
    with pytest.raises(ProtocolError, match="pty-write"):
        parse(Message.request("s.pty-write", {"data": 5}), PtyWrite)


def test_no_second_registration_path_for_plugins():
    assert not hasattr(plugin_mod.ShellPlugin, "methods")
