"""Clients of a broker: the RPC core shared by every caller (rpc.py), the async
handle used by job shells and brokers' own services (aio.py), and the blocking
handle the CLI uses (sync.py).  `connect.py` resolves FLUXLITE_URI."""
