"""`flux.constraint`: the parser of Flux's constraint query language."""
