"""`flux.Message`: a message a watcher or event_recv() hands to Python code,
over fluxlite's protocol Message (`.msg`)."""

from __future__ import annotations

import json

from fluxlite.protocol import message as _m

_TYPES = {_m.REQUEST: 1, _m.RESPONSE: 2, _m.EVENT: 4, _m.CONTROL: 8}


class Message:
    """`.topic`, `.payload` (decoded), `.payload_str` (JSON text), `.type` (Flux's
    FLUX_MSGTYPE_* number)."""

    def __init__(self, msg):
        self.msg = msg

    @property
    def topic(self) -> str:
        return self.msg.topic

    @property
    def payload(self):
        return self.msg.payload

    @property
    def payload_str(self) -> str | None:
        value = self.msg.payload
        return None if value is None else json.dumps(value)

    @property
    def type(self) -> int:
        return _TYPES.get(self.msg.type, 0)

    def __repr__(self) -> str:
        return f"flux.Message(topic={self.topic!r}, type={self.type})"
