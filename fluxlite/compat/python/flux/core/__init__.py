"""`flux.core`: the handle (flux.core.handle.Flux), its watchers and `inner`."""
