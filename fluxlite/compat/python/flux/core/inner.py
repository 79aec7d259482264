"""`flux.core.inner`: in Flux, the cffi bindings of libflux.  fluxlite has no
libflux; `ffi.NULL` (None) is what Python code passes for "no pointer" to the
calls of fluxlite's `flux` package that accept one (future_create, fulfill,
future_get).  Any other use of the C layer is not available."""

from fluxlite.errors import NoService


class _FFI:
    NULL = None

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise NoService(f"flux.core.inner.ffi.{name}: fluxlite has no libflux C layer "
                        "(see the Flux compatibility section of the guide)")


ffi = _FFI()
