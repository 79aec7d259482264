"""`flux.resource`: resource sets (ResourceSet, Rv1Set), a pool that allocates
from one (Rv1Pool), and the errors an allocation ends with."""

from __future__ import annotations

import errno


class InsufficientResources(OSError):
    """Not now: the request fits the pool but too much of it is in use (ENOSPC)."""

    def __init__(self, message: str = "insufficient resources"):
        super().__init__(errno.ENOSPC, message)


class InfeasibleRequest(OSError):
    """Never: the pool cannot satisfy the request even when idle (EOVERFLOW)."""

    def __init__(self, message: str = "unsatisfiable request"):
        super().__init__(errno.EOVERFLOW, message)


from .ResourceSet import ResourceSet  # noqa: E402
from .Rv1Pool import ResourceRequest, Rv1Pool  # noqa: E402
from .Rv1Set import Rv1Set  # noqa: E402

__all__ = ["ResourceSet", "Rv1Set", "Rv1Pool", "ResourceRequest", "InsufficientResources",
           "InfeasibleRequest"]
