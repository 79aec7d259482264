# Names vulture takes for dead code that are part of an interface fluxlite
# keeps on purpose (read by `vulture fluxlite .ci/vulture-allow.py`).

# flux.job.FluxExecutor(threads=, thread_name_prefix=, poll_interval=): Flux's
# constructor arguments, accepted so that Flux programs run unchanged
threads
thread_name_prefix
poll_interval
