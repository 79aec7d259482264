"""Service.is_owner / authorize: the one owner check services share."""

from __future__ import annotations

import pytest

from fluxlite.errors import PermissionDenied
from fluxlite.protocol.message import ROLE_OWNER, ROLE_USER, Message
from fluxlite.service.base import Service, ServiceContext

pytestmark = pytest.mark.timeout(30)

OWNER_UID, OTHER_UID = 1000, 2000


def _service() -> Service:
    ctx = ServiceContext(rank=0, size=1, owner=OWNER_UID, hostname="h", hosts=("h",),
                         attrs={},
                         rpc=None, send=None, respond=lambda m: None, publish=None,
                         state=lambda: "run", at_least=lambda s: False)
    return Service(ctx)


def _msg(userid: int, role: int) -> Message:
    m = Message.request("x.y", {})
    m.userid, m.role = userid, role
    return m


@pytest.mark.parametrize("userid, role, owner", [
    (OWNER_UID, ROLE_OWNER, True),
    (OWNER_UID, ROLE_USER, False),     # the owner's uid without the owner role
    (OTHER_UID, ROLE_OWNER, False),    # the role without the owner's uid
    (OTHER_UID, ROLE_USER, False),
])
def test_is_owner_needs_role_and_uid(userid, role, owner):
    assert _service().is_owner(_msg(userid, role)) is owner


def test_authorize_lets_the_owner_and_the_jobs_user_only():
    s = _service()
    s.authorize(_msg(OWNER_UID, ROLE_OWNER), OTHER_UID, "job f1")
    s.authorize(_msg(OTHER_UID, ROLE_USER), OTHER_UID, "job f1")
    with pytest.raises(PermissionDenied, match="only the owner of job f1"):
        s.authorize(_msg(3000, ROLE_USER), OTHER_UID, "job f1")
