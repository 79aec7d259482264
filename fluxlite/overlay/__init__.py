"""The tree overlay: sockets toward the parent and the children, the hello
handshake, keepalives, torpid/lost liveness and subtree status."""
