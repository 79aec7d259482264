"""Flux compatibility, opt-in: a `flux` command (bin/flux) that runs the fluxlite
command of the same name.  Nothing here is on PATH until a user asks for it with
`eval "$(fluxlite compat env)"`."""
