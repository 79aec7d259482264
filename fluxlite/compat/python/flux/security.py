"""`flux.security`: in Flux, the bindings of flux-security (signing a job request
with the submitting user's credential, `SecurityContext.sign_wrap` and
`sign_unwrap`).  fluxlite has no flux-security: a job is submitted unsigned over
the local connection, whose credentials the broker takes from the socket, and
`job-ingest.submit` takes Flux's unsigned J ("none" mechanism).  So a
SecurityContext cannot be made: OSError(ENOSYS) naming the call says so."""

from __future__ import annotations

from fluxlite.errors import NoService


class SecurityContext:
    """Flux's signing context: not available in fluxlite (see the module)."""

    def __init__(self, config_pattern=None):
        del config_pattern      # Flux's argument: which flux-security config to read
        raise NoService("flux.security.SecurityContext: fluxlite has no flux-security "
                        "(jobs are submitted unsigned; the broker takes the submitter's "
                        "identity from the local socket)")


def __getattr__(name):
    from . import missing
    raise missing("flux.security", name)
