"""Flux compatibility, opt-in: a `flux` command (bin/flux) that runs the fluxlite
command of the same name, and a minimal `flux` Python package (python/flux).
Neither is on PATH or PYTHONPATH until a user asks for them with
`eval "$(fluxlite compat env)"`."""
