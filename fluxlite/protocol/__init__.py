"""The wire protocol: one message shape and its one codec (message.py), the
socket boundary (transport.py).  docs/protocol.md is the written spec."""
